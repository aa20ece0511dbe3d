# SPDX-License-Identifier: Apache-2.0
"""code: the code interpreter (POST /v1/sandboxes/{id}/code/execute, .../code/contexts).

Results follow E2B's code interpreter: each `result` carries its MIME representations as
fields (text, html, markdown, svg, png, jpeg, pdf, latex, json, javascript, data, chart),
images as base64 strings. docs/code-interpreter.md.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

MIME_FIELDS = ("text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
               "javascript", "data", "chart")


@dataclass
class Result:
    """One rich result: the last expression's value (is_main_result) or a display (a figure)."""
    is_main_result: bool = False
    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    pdf: Optional[str] = None
    latex: Optional[str] = None
    json: Any = None
    javascript: Optional[str] = None
    data: Any = None
    chart: Any = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Result":
        r = cls(is_main_result=bool(d.get("is_main_result")))
        for k, v in d.items():
            if k in MIME_FIELDS:
                setattr(r, k, v)
            elif k not in ("type", "is_main_result"):
                r.extra[k] = v
        return r

    def formats(self) -> List[str]:
        """The representations present, besides text."""
        return [k for k in MIME_FIELDS if k != "text" and getattr(self, k) is not None] + \
            list(self.extra)


@dataclass
class ExecutionError:
    """An exception raised by the code: its name, value and traceback."""
    name: str
    value: str
    traceback: str


@dataclass
class Logs:
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class Execution:
    """What one run_code produced. `text` is the main result's text."""
    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: Optional[int] = None

    @property
    def text(self) -> Optional[str]:
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None


@dataclass
class Context:
    """A live interpreter: variables, imports and cwd persist between run_code calls."""
    id: str
    language: str
    cwd: str

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Context":
        return cls(id=d.get("id", ""), language=d.get("language", ""), cwd=d.get("cwd", ""))


Callback = Optional[Callable[[Any], None]]


def run_code(transport, base: str, code: str, *, language: Optional[str] = None,
             context=None, env: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = None, on_stdout: Callback = None,
             on_stderr: Callback = None, on_result: Callback = None,
             on_error: Callback = None) -> Execution:
    body: Dict[str, Any] = {"code": code}
    if language is not None:
        body["language"] = language
    if context is not None:
        body["context"] = context.id if isinstance(context, Context) else str(context)
    if env is not None:
        body["env"] = dict(env)
    if timeout is not None:
        body["timeout"] = timeout
    r = transport.open("POST", f"{base}/code/execute", json_body=body,
                       headers={"Accept": "application/x-ndjson"},
                       timeout=None if timeout is None else timeout + 30)
    ex = Execution()
    try:
        for d in r.json_lines():
            t = d.get("type")
            if t == "stdout":
                ex.logs.stdout.append(d.get("text", ""))
                if on_stdout:
                    on_stdout(d.get("text", ""))
            elif t == "stderr":
                ex.logs.stderr.append(d.get("text", ""))
                if on_stderr:
                    on_stderr(d.get("text", ""))
            elif t == "result":
                res = Result.from_json(d)
                ex.results.append(res)
                if on_result:
                    on_result(res)
            elif t == "error":
                ex.error = ExecutionError(d.get("name", ""), d.get("value", ""),
                                          d.get("traceback", ""))
                if on_error:
                    on_error(ex.error)
            elif t == "number_of_executions":
                ex.execution_count = d.get("execution_count")
    finally:
        r.close()
    return ex


def create_context(transport, base: str, language: Optional[str] = None,
                   cwd: Optional[str] = None) -> Context:
    body = {k: v for k, v in (("language", language), ("cwd", cwd)) if v is not None}
    return Context.from_json(transport.json("POST", f"{base}/code/contexts", json_body=body))


def list_contexts(transport, base: str) -> List[Context]:
    d = transport.json("GET", f"{base}/code/contexts")
    return [Context.from_json(x) for x in d.get("contexts", [])]


def _ctx_id(context) -> str:
    return context.id if isinstance(context, Context) else str(context)


def restart_context(transport, base: str, context) -> None:
    transport.json("POST", f"{base}/code/contexts/{_ctx_id(context)}/restart")


def remove_context(transport, base: str, context) -> None:
    transport.json("DELETE", f"{base}/code/contexts/{_ctx_id(context)}")


__all__ = ["Result", "ExecutionError", "Logs", "Execution", "Context"]
