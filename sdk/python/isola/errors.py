# SPDX-License-Identifier: Apache-2.0
"""Typed exceptions carrying the API's {code, message} and the HTTP status."""

from typing import Optional


class IsolaError(Exception):
    """Any failure reported by isolad or on the way to it.

    code: the API's error code ("not_found", "invalid", ...); status: the HTTP status, or
    None when no response was received (transport errors) or the error came in a stream.
    """

    def __init__(self, message: str, code: str = "internal", status: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status

    def __str__(self) -> str:
        where = f"HTTP {self.status}, " if self.status else ""
        return f"{self.message} ({where}{self.code})"


class InvalidError(IsolaError):
    """400: invalid, not_dir, is_dir."""


class UnauthorizedError(IsolaError):
    """401: missing or wrong bearer token (TCP)."""


class ForbiddenError(IsolaError):
    """403."""


class QuotaExceededError(ForbiddenError):
    """403 quota_exceeded: the tenant's quota would be exceeded."""


class RateLimitedError(IsolaError):
    """429 rate_limited: too many creations; retry_after is the server's Retry-After (s)."""

    def __init__(self, message: str, code: str = "rate_limited", status: Optional[int] = None,
                 retry_after: Optional[float] = None):
        super().__init__(message, code, status)
        self.retry_after = retry_after


class NotFoundError(IsolaError):
    """404: unknown sandbox, process, file, template or program."""


class SandboxEndedError(NotFoundError):
    """410 sandbox_ended: the sandbox existed and ended (isolad keeps a tombstone, 24 h by
    default). end_reason: expired, idle, destroyed or error; ended_at: unix time; detail:
    e.g. "ttl 3s". A NotFoundError, so code that catches a missing sandbox still does."""

    def __init__(self, message: str, code: str = "sandbox_ended", status: Optional[int] = None,
                 end_reason: Optional[str] = None, ended_at: Optional[float] = None,
                 detail: Optional[str] = None):
        super().__init__(message, code, status)
        self.end_reason = end_reason
        self.ended_at = ended_at
        self.detail = detail


class MethodNotAllowedError(IsolaError):
    """405."""


class ConflictError(IsolaError):
    """409: conflict, exists, busy (e.g. sandbox not running, template in use)."""


class NameTakenError(ConflictError):
    """409 name_taken: another live sandbox of the tenant holds the name (the message names
    it)."""


class TooLargeError(IsolaError):
    """413: body or upload over the daemon's cap."""


class RangeNotSatisfiableError(IsolaError):
    """416: a read range outside the file."""


class InternalError(IsolaError):
    """500."""


class NotSupportedError(IsolaError):
    """501: e.g. the microvm tier in a build without it."""


class UnavailableError(IsolaError):
    """503 (e.g. isolad's database is read-only), or isolad could not be reached at all
    (status None)."""


class TimeoutError(IsolaError):  # noqa: A001 - deliberately mirrors the API's code
    """504: e.g. wait() on a process still running after its timeout."""


class NoSpaceError(IsolaError):
    """507: the sandbox's disk, the daemon's spool or its state filesystem is full (an
    operation it could not record is refused and nothing changed)."""


class ProtocolError(IsolaError):
    """isolad sent something this SDK cannot read (malformed JSON, a broken stream)."""


class DependencyError(IsolaError):
    """424 failed_dependency: the sandbox's template lacks what the operation needs (the code
    interpreter: python3 with jupyter_client and ipykernel)."""


_BY_CODE = {
    "failed_dependency": DependencyError,
    "invalid": InvalidError,
    "not_dir": InvalidError,
    "is_dir": InvalidError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "quota_exceeded": QuotaExceededError,
    "rate_limited": RateLimitedError,
    "not_found": NotFoundError,
    "sandbox_ended": SandboxEndedError,
    "name_taken": NameTakenError,
    "method_not_allowed": MethodNotAllowedError,
    "conflict": ConflictError,
    "exists": ConflictError,
    "busy": ConflictError,
    "too_large": TooLargeError,
    "range_not_satisfiable": RangeNotSatisfiableError,
    "internal": InternalError,
    "not_supported": NotSupportedError,
    "unavailable": UnavailableError,
    "timeout": TimeoutError,
    "no_space": NoSpaceError,
}

_BY_STATUS = {
    400: InvalidError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    410: SandboxEndedError,
    405: MethodNotAllowedError,
    409: ConflictError,
    429: RateLimitedError,
    413: TooLargeError,
    416: RangeNotSatisfiableError,
    500: InternalError,
    501: NotSupportedError,
    503: UnavailableError,
    504: TimeoutError,
    507: NoSpaceError,
}


def error_for(code: Optional[str], message: str, status: Optional[int] = None,
              body: Optional[dict] = None) -> IsolaError:
    """The exception for an API error: chosen by code, else by status. body: the whole error
    object (a 410 carries end_reason, ended_at, detail)."""
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status or 0) or IsolaError
    if cls is SandboxEndedError:
        b = body or {}
        return SandboxEndedError(message, code or "sandbox_ended", status,
                                 end_reason=b.get("end_reason"), ended_at=b.get("ended_at"),
                                 detail=b.get("detail"))
    return cls(message, code or "internal", status)
