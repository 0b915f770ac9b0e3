"""The closed set of failure codes of leased (docs/api.md), one exception each.

Every failure a call can report is a subclass of :class:`LeaseError`; the
code on the wire decides the class, never the HTTP status alone (a status
without a typed envelope falls back to the class of that status).
"""
from typing import Any, Dict, Optional, Type


class LeaseError(Exception):
    """A typed failure answered by leased, or established by the client."""

    code = "lease_error"

    def __init__(
        self,
        message: str = "",
        *,
        correlation_id: Optional[str] = None,
        retryable: bool = False,
        retry_after_ms: Optional[int] = None,
        field: Optional[str] = None,
        request_id: Optional[str] = None,
        http_status: Optional[int] = None,
        body: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message or self.code)
        self.message = message or self.code
        self.correlation_id = correlation_id
        self.retryable = retryable
        self.retry_after_ms = retry_after_ms
        self.field = field
        self.request_id = request_id
        self.http_status = http_status
        self.body = body

    def __str__(self) -> str:
        parts = [f"{self.code}: {self.message}"]
        if self.field:
            parts.append(f"field={self.field}")
        if self.request_id:
            parts.append(f"request_id={self.request_id}")
        if self.correlation_id:
            parts.append(f"correlation_id={self.correlation_id}")
        return " ".join(parts)


class InvalidLeaseRequest(LeaseError):
    """400: malformed identity, TTL, deadline, page, metadata; ``field`` names it."""

    code = "invalid_lease_request"


class InvalidCredential(LeaseError):
    """401: the token is missing, malformed, unknown, revoked or expired."""

    code = "invalid_credential"


class AccessDenied(LeaseError):
    """403: a capability or scope the credential lacks."""

    code = "access_denied"


class LeaseNotFound(LeaseError):
    """404: inspect found no lease (or none the caller may see)."""

    code = "lease_not_found"


class DeadlineExceeded(LeaseError):
    """408: the deadline passed before the operation began; nothing happened."""

    code = "deadline_exceeded"


class LeaseConflict(LeaseError):
    """409: another holder has the lease (after the acquire's wait)."""

    code = "lease_conflict"


class LeaseLost(LeaseError):
    """409: the lease is no longer held by this holder (expired, released,
    force-released, revoked, another token), or a hold lost its authority."""

    code = "lease_lost"


class IdempotencyConflict(LeaseError):
    """409: the request id was used before with different inputs."""

    code = "idempotency_conflict"


class WriteConflict(LeaseError):
    """409: a commit's expected revision differs; ``current_revision`` is the one found."""

    code = "write_conflict"

    def __init__(self, message: str = "", *, current_revision: Optional[int] = None,
                 **kw: Any) -> None:
        super().__init__(message, **kw)
        self.current_revision = current_revision


class RateLimited(LeaseError):
    """429: admission control refused the request; retry after ``retry_after_ms``."""

    code = "lease_rate_limited"


class BackendUnavailable(LeaseError):
    """503 (or no answer before anything was sent): nothing was submitted."""

    code = "lease_backend_unavailable"


class OutcomeUnknown(LeaseError):
    """The mutation may or may not have happened. Call again with the same
    ``request_id`` (and the same inputs) to resolve it: a committed request
    answers its original result with ``replayed`` true, one that never
    happened happens then, once."""

    code = "lease_outcome_unknown"


_FAILURES: "tuple[Type[LeaseError], ...]" = (
    InvalidLeaseRequest,
    InvalidCredential,
    AccessDenied,
    LeaseNotFound,
    DeadlineExceeded,
    LeaseConflict,
    LeaseLost,
    IdempotencyConflict,
    WriteConflict,
    RateLimited,
    BackendUnavailable,
    OutcomeUnknown,
)
ERRORS_BY_CODE: Dict[str, Type[LeaseError]] = {cls.code: cls for cls in _FAILURES}

# An answer without a typed envelope (a proxy's page, an HTTP library's own
# error) is judged by its status alone, as the C client does.
ERRORS_BY_STATUS: Dict[int, Type[LeaseError]] = {
    400: InvalidLeaseRequest,
    413: InvalidLeaseRequest,
    415: InvalidLeaseRequest,
    401: InvalidCredential,
    403: AccessDenied,
    404: LeaseNotFound,
    408: DeadlineExceeded,
    429: RateLimited,
}

SUCCESS_CODES = frozenset(
    {
        "lease_acquired",
        "lease_renewed",
        "lease_released",
        "lease_inspected",
        "lease_listed",
        "lease_revoked",
        "commit_accepted",
    }
)


def error_from_envelope(env: Dict[str, Any], status: int,
                        request_id: Optional[str]) -> LeaseError:
    """The exception for a typed error envelope (its code is in ERRORS_BY_CODE)."""
    cls = ERRORS_BY_CODE[env["code"]]
    # a value of the wrong JSON type is dropped, never passed on as another type
    kw: Dict[str, Any] = dict(
        correlation_id=_typed(env.get("correlation_id"), str),
        retryable=env.get("retryable") is True,
        retry_after_ms=_typed(env.get("retry_after_ms"), int),
        field=_typed(env.get("field"), str),
        request_id=request_id,
        http_status=status,
        body=env,
    )
    if cls is WriteConflict:
        kw["current_revision"] = _typed(env.get("current_revision"), int)
    return cls(_typed(env.get("msg"), str) or "", **kw)


def _typed(value: Any, kind: type) -> Any:
    """value when it is of kind (an int is not a bool), else None."""
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    return None
