"""Errors as JSON problem documents (RFC 9457): ``type``, ``title``, ``status``, ``detail``, plus extensions.

For: the one shape every error response of the server takes, and the exception handlers that produce it
(plangate's own errors, FastAPI's validation errors, Starlette's HTTP errors, and anything unexpected).
Not for: deciding whether something is an error (the routes do).

A client mistake is never a 500: a malformed body is a 422 that names the field, an unknown id a 404, a
stale interaction a 409. Messages never carry the value of a field (it may be a secret); only its path.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from plangate.errors import (
    ConfigError,
    FormulaError,
    InteractionError,
    NotFoundError,
    PlangateError,
    RunLeased,
    Signal,
    StaleInteraction,
    StoreError,
    UserError,
)
from plangate.server._public import public_text

logger = logging.getLogger("plangate.server")

PROBLEM_MEDIA_TYPE = "application/problem+json"

_STORE_WHERE = re.compile(r" in the store at .*$")

_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Unprocessable request",
    500: "Internal server error",
    503: "Service unavailable",
}


class Problem(Signal):
    """Raised by a route to answer with a problem document.

    Args:
        status: the HTTP status.
        code: a stable, machine-readable name (``not-found``, ``stale-interaction``), the end of ``type``.
        detail: one sentence for a person: what was expected, what was found, where.
        headers: extra response headers (``WWW-Authenticate``).
        extra: extension members (``issues``, ``errors``).
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra
        super().__init__(detail)


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem document response; absolute paths in its text are shortened (``_public``)."""
    if isinstance(extra.get("issues"), list):
        extra["issues"] = public_issues(extra["issues"])
    shown = public_text(detail)
    if shown != detail:
        logger.info("%s (%d): %s", code, status, detail)  # the whole text, paths included, for the log only
    body: dict[str, Any] = {
        "type": f"urn:plangate:problem:{code}",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": shown,
        **extra,
    }
    return JSONResponse(body, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_MEDIA_TYPE)


def from_error(exc: PlangateError) -> Problem:
    """The problem a plangate error stands for (the most specific class decides)."""
    if isinstance(exc, NotFoundError):
        # The store names its file; a client needs only to know the id is not (its) one.
        return Problem(404, "not-found", _STORE_WHERE.sub("", str(exc)))
    if isinstance(exc, StaleInteraction):
        return Problem(409, "stale-interaction", str(exc), reason=StaleInteraction.code)
    if isinstance(exc, InteractionError):
        return Problem(409, "conflict", str(exc))
    if isinstance(exc, RunLeased):
        # Who holds the lease (a host and a pid) belongs in the log, not in a client's answer.
        logger.warning("refused: %s", exc)
        detail = f"run {exc.run_id!r} is being advanced by another process; nothing changed: try again later"
        return Problem(409, "run-leased", detail, reason="run_leased")
    if isinstance(exc, FormulaError | ConfigError):
        return Problem(422, "invalid", str(exc))
    if isinstance(exc, UserError):
        return Problem(400, "bad-request", str(exc))
    if isinstance(exc, StoreError):
        # The store's message names files and statements: useful in the log, not for a client.
        logger.error("store error: %s", exc)
        return Problem(503, "store-unavailable", "the store cannot be reached or written; try again later")
    logger.error("run error: %s", exc)
    return Problem(500, "internal", "the server failed while running; the error is in its log")


def public_issues(issues: Sequence[Any]) -> list[Any]:
    """Check issues (``{level, code, path, message}``) with absolute paths in their messages shortened."""
    shown: list[Any] = []
    for issue in issues:
        if isinstance(issue, dict) and isinstance(issue.get("message"), str):
            issue = {**issue, "message": public_text(issue["message"])}
        shown.append(issue)
    return shown


def field_errors(errors: Sequence[Any], body: object = None) -> list[dict[str, str]]:
    """FastAPI/pydantic validation errors as ``{field, message}``, without the offending values.

    Args:
        errors: the errors as ``RequestValidationError.errors()`` lists them.
        body: the request body that failed, when it was JSON (to recognise a union's tag in a path).
    """
    tag = body.get("kind") if isinstance(body, dict) else None
    found: list[dict[str, str]] = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        kind = error.get("type")
        # FastAPI prefixes the source (body, query, path, header); a union chosen by ``kind`` adds the tag,
        # which is not a field the client wrote.
        if len(loc) > 1 and loc[0] == "body" and isinstance(tag, str) and loc[1] == tag:
            del loc[1]
        message = str(error.get("msg", "invalid value"))
        if kind == "extra_forbidden":
            message = "unknown field"
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "json_invalid":
            loc = ["body"]
            message = f"the body is not valid JSON ({error.get('ctx', {}).get('error', 'syntax error')})"
        found.append({"field": ".".join(loc) or "body", "message": message})
    return found


def install(app: FastAPI) -> None:
    """Make every error ``app`` raises a problem document."""

    # Registered with the decorator, whose type lets each handler name the class it handles.
    @app.exception_handler(Problem)
    async def on_problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc.status, exc.code, exc.detail, headers=exc.headers, **exc.extra)

    @app.exception_handler(PlangateError)
    async def on_plangate(request: Request, exc: PlangateError) -> JSONResponse:
        found = from_error(exc)
        return problem_response(found.status, found.code, found.detail, **found.extra)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = field_errors(exc.errors(), exc.body)
        first = errors[0] if errors else {"field": "body", "message": "invalid request"}
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return problem_response(
            422, "invalid-request", f"{first['field']}: {first['message']}{more}", errors=errors
        )

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else _TITLES.get(exc.status_code, "Error")
        code = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
        return problem_response(exc.status_code, code, detail, headers=exc.headers)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s %s", request.method, request.url.path)
        return problem_response(500, "internal", "the server failed; the error is in its log")


__all__ = [
    "PROBLEM_MEDIA_TYPE",
    "Problem",
    "field_errors",
    "from_error",
    "install",
    "problem_response",
    "public_issues",
]
