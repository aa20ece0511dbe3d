# SPDX-License-Identifier: Apache-2.0
"""isola: Python SDK for isola's native sandbox API (docs/openapi.yaml).

    import isola
    c = isola.Client()                   # ISOLA_SOCKET / ISOLA_URL + ISOLA_TOKEN, or the default socket
    with c.create_sandbox() as sb:
        print(sb.exec(["python3", "-c", "print(6*7)"]).stdout)

Standard library only. See docs/sdk.md.
"""

from .client import Client, EventStream, Files, Processes, Sandbox
from .code import Context, Execution, ExecutionError, Logs, Result
from .errors import (ConflictError, ForbiddenError, InternalError, InvalidError, IsolaError,
                     MethodNotAllowedError, NoSpaceError, NotFoundError, NotSupportedError,
                     ProtocolError, QuotaExceededError, RangeNotSatisfiableError,
                     RateLimitedError, TimeoutError, TooLargeError, SandboxEndedError,
                     NameTakenError, DependencyError,
                     UnauthorizedError, UnavailableError, error_for)
from .models import (ArchiveResult, Entry, Event, ExecResult, ExitStatus, Exposure, Health,
                     ImportProgress, Listing, OutputResult, Process, SandboxInfo, Snapshot,
                     Template)
from .ws import PtySession, WebSocket, WebSocketError

__version__ = "0.1.0"

__all__ = [
    "Client", "Sandbox", "Processes", "Files", "EventStream", "PtySession", "WebSocket",
    "ArchiveResult", "Entry", "Event", "ExecResult", "ExitStatus", "Health", "ImportProgress",
    "Listing", "OutputResult", "Process", "SandboxInfo", "Snapshot", "Exposure", "Template",
    "IsolaError", "InvalidError", "UnauthorizedError", "ForbiddenError", "NotFoundError",
    "MethodNotAllowedError", "ConflictError", "TooLargeError", "RangeNotSatisfiableError",
    "InternalError", "NotSupportedError", "UnavailableError", "TimeoutError", "NoSpaceError",
    "ProtocolError", "QuotaExceededError", "RateLimitedError", "WebSocketError", "error_for", "__version__",
    "SandboxEndedError", "NameTakenError", "DependencyError",
    "Context", "Execution", "ExecutionError", "Logs", "Result",
]
