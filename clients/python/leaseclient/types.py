"""The values the client speaks: lock identities, leases, pages, commits."""
import datetime
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

IDENTITY_FIELDS = ("tenant_id", "program_id", "target_namespace", "target_id",
                   "actor_name", "workflow_name", "operation_class")


@dataclass(frozen=True)
class Identity:
    """A lock identity (docs/contract.md): the seven components of a target lease.
    ``operation_class`` None means the service's default ("default")."""

    tenant_id: str
    program_id: str
    target_namespace: str
    target_id: str
    actor_name: str
    workflow_name: str
    operation_class: Optional[str] = None

    def to_json(self) -> Dict[str, str]:
        out = {k: getattr(self, k) for k in IDENTITY_FIELDS[:6]}
        if self.operation_class is not None:
            out["operation_class"] = self.operation_class
        return out

    @classmethod
    def of(cls, value: "IdentityLike") -> "Identity":
        if isinstance(value, Identity):
            return value
        unknown = set(value) - set(IDENTITY_FIELDS)
        if unknown:
            raise ValueError(f"unknown identity fields: {sorted(unknown)}")
        return cls(**{k: value[k] for k in IDENTITY_FIELDS if k in value})


IdentityLike = Union[Identity, Mapping[str, Any]]


def parse_time_ms(text: Optional[str]) -> Optional[int]:
    """Milliseconds since the epoch of an RFC 3339 timestamp of the service."""
    if not text:
        return None
    t = text.replace("Z", "+00:00") if text.endswith("Z") else text
    dt = datetime.datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(round(dt.timestamp() * 1000))


@dataclass
class LeaseRecord:
    """A lease record: a lease as the service answered it (docs/api.md,
    "Lease object"; lease_record_t in C, LeaseRecord in Go), and
    the facts of the call that returned it."""

    identity: Identity
    lease_id: str
    fencing_token: int
    state: str = "active"
    ttl_ms: int = 0
    acquired_at: Optional[str] = None
    renewed_at: Optional[str] = None
    expires_at: Optional[str] = None
    ended_at: Optional[str] = None
    maximum_lifetime_ms: Optional[int] = None
    service_instance_id: Optional[str] = None
    execution_id: Optional[str] = None
    job_id: Optional[str] = None
    trace_id: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    # of the answer, not of the lease
    code: Optional[str] = None
    replayed: bool = False
    current_state: Optional[str] = None
    waited_ms: int = 0
    request_id: Optional[str] = None
    correlation_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def grant_ms(self) -> int:
        """What the answer granted: min(ttl_ms, expires_at - renewed_at)."""
        exp, ren = parse_time_ms(self.expires_at), parse_time_ms(self.renewed_at)
        if exp is None or ren is None:
            return max(self.ttl_ms, 0)
        span = exp - ren
        grant = self.ttl_ms if 0 < self.ttl_ms < span else span
        return max(grant, 0)

    @property
    def grant_capped(self) -> bool:
        """The maximum lifetime shortened the grant: renewing cannot extend it."""
        exp, ren = parse_time_ms(self.expires_at), parse_time_ms(self.renewed_at)
        if exp is None or ren is None:
            return False
        return exp - ren + 1 < self.ttl_ms  # one ms of slack: both truncated to ms

    @classmethod
    def from_json(cls, obj: Dict[str, Any], envelope: Optional[Dict[str, Any]] = None,
                  request_id: Optional[str] = None) -> "LeaseRecord":
        env = envelope or {}
        waited = env.get("waited_ms", 0)
        if not isinstance(obj, dict) or not isinstance(obj.get("lock_identity"), dict):
            raise TypeError("a lease must be an object with a lock_identity object")
        # the service's types (docs/api.md, "Lease object"): anything else is
        # refused here, so that no caller meets a lease_id that is a number
        for name, kinds in _LEASE_FIELD_TYPES.items():
            value = obj.get(name)
            if (value is not None or name in _LEASE_REQUIRED) and (
                    not isinstance(value, kinds) or isinstance(value, bool)):
                raise TypeError(f"lease field {name} is {type(value).__name__}")
        for name in ("replayed",):
            if name in env and not isinstance(env[name], bool):
                raise TypeError(f"answer field {name} is {type(env[name]).__name__}")
        timestamps = ("acquired_at", "renewed_at", "expires_at", "ended_at")
        for name in timestamps:
            if obj.get(name) is not None and parse_time_ms(obj[name]) is None:
                raise ValueError(f"lease field {name} is not an RFC 3339 time")
        return cls(
            identity=Identity.of(obj["lock_identity"]),
            lease_id=obj["lease_id"],
            fencing_token=obj["fencing_token"],
            state=obj.get("state") or "active",
            ttl_ms=obj.get("ttl_ms") or 0,
            acquired_at=obj.get("acquired_at"),
            renewed_at=obj.get("renewed_at"),
            expires_at=obj.get("expires_at"),
            ended_at=obj.get("ended_at"),
            maximum_lifetime_ms=obj.get("maximum_lifetime_ms"),
            service_instance_id=obj.get("service_instance_id"),
            execution_id=obj.get("execution_id"),
            job_id=obj.get("job_id"),
            trace_id=obj.get("trace_id"),
            metadata=obj.get("metadata") if isinstance(obj.get("metadata"), dict) else None,
            code=env.get("code"),
            replayed=env.get("replayed") is True,
            current_state=env.get("current_state") if isinstance(env.get("current_state"),
                                                                 str) else None,
            waited_ms=waited if isinstance(waited, int) and waited > 0 else 0,
            request_id=request_id,
            correlation_id=env.get("correlation_id"),
            raw=obj,
        )


_LEASE_FIELD_TYPES: Dict[str, Any] = {
    "lease_id": str, "fencing_token": int, "state": str, "ttl_ms": int,
    "acquired_at": str, "renewed_at": str, "expires_at": str, "ended_at": str,
    "maximum_lifetime_ms": int, "service_instance_id": str, "execution_id": str,
    "job_id": str, "trace_id": str,
}
_LEASE_REQUIRED = ("lease_id", "fencing_token")

def format_time_ms(ms: int) -> str:
    """The RFC 3339 text (UTC, milliseconds) of ms since the epoch, as the service writes it."""
    dt = datetime.datetime.fromtimestamp(ms / 1000.0, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{(ms % 1000):03d}Z"


@dataclass
class SessionRecord:
    """A session as the service answered it (docs/api.md, "Sessions"):
    ``session_open``, ``session_keepalive`` and ``session_close`` answer one.
    Its leases live while it does (and each within its own maximum
    lifetime); one keep-alive extends them all."""

    session_id: str
    state: str
    ttl_ms: int
    renewed_at: str
    expires_at: str
    created_at: Optional[str] = None
    tenant_id: Optional[str] = None
    owner_principal_id: Optional[str] = None
    owner_credential_id: Optional[str] = None
    service_instance_id: Optional[str] = None
    # of the answer, not of the session
    code: Optional[str] = None
    replayed: bool = False
    leases_ended: Optional[int] = None  # session_close: leases it ended now
    more: Optional[bool] = None  # session_close: the sweeper ends the rest
    request_id: Optional[str] = None
    correlation_id: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def grant_ms(self) -> int:
        """What the answer granted: min(ttl_ms, expires_at - renewed_at)."""
        exp, ren = parse_time_ms(self.expires_at), parse_time_ms(self.renewed_at)
        span = (exp or 0) - (ren or 0)
        return max(min(self.ttl_ms, span), 0)

    @classmethod
    def from_json(cls, obj: Any, envelope: Optional[Dict[str, Any]] = None,
                  request_id: Optional[str] = None) -> "SessionRecord":
        """Refuses (TypeError, ValueError) anything but the service's shape:
        a session id that is a number, a TTL that is text, a time that is
        not RFC 3339 are not trusted."""
        env = envelope or {}
        if not isinstance(obj, dict):
            raise TypeError("a session must be an object")
        for name in _SESSION_REQUIRED:
            if name not in obj:
                raise TypeError(f"session field {name} is missing")
        for name, kind in _SESSION_FIELD_TYPES.items():
            value = obj.get(name)
            if (value is not None or name in _SESSION_REQUIRED) and (
                    not isinstance(value, kind) or isinstance(value, bool)):
                raise TypeError(f"session field {name} is {type(value).__name__}")
        if not obj["session_id"] or obj["ttl_ms"] < 1:
            raise ValueError("session_id empty or ttl_ms below 1")
        for name in ("created_at", "renewed_at", "expires_at"):
            if obj.get(name) is not None and parse_time_ms(obj[name]) is None:
                raise ValueError(f"session field {name} is not an RFC 3339 time")
        ended, more = env.get("leases_ended"), env.get("more")
        if ended is not None and (not isinstance(ended, int) or isinstance(ended, bool)
                                  or ended < 0):
            raise TypeError(f"answer field leases_ended is {type(ended).__name__}")
        if more is not None and not isinstance(more, bool):
            raise TypeError(f"answer field more is {type(more).__name__}")
        if "replayed" in env and not isinstance(env["replayed"], bool):
            raise TypeError("answer field replayed is not a boolean")
        corr = env.get("correlation_id")
        return cls(session_id=obj["session_id"], state=obj["state"], ttl_ms=obj["ttl_ms"],
                   renewed_at=obj["renewed_at"], expires_at=obj["expires_at"],
                   created_at=obj.get("created_at"), tenant_id=obj.get("tenant_id"),
                   owner_principal_id=obj.get("owner_principal_id"),
                   owner_credential_id=obj.get("owner_credential_id"),
                   service_instance_id=obj.get("service_instance_id"),
                   code=env.get("code"), replayed=env.get("replayed") is True,
                   leases_ended=ended, more=more, request_id=request_id,
                   correlation_id=corr if isinstance(corr, str) else None, raw=obj)


_SESSION_FIELD_TYPES: Dict[str, Any] = {
    "session_id": str, "state": str, "ttl_ms": int, "renewed_at": str, "expires_at": str,
    "created_at": str, "tenant_id": str, "owner_principal_id": str,
    "owner_credential_id": str, "service_instance_id": str,
}
_SESSION_REQUIRED = ("session_id", "state", "ttl_ms", "renewed_at", "expires_at")


# Deprecated: the record's earlier name (docs/clients.md, "Names"); the very
# same class, so isinstance, construction and from_json work under either.
Lease = LeaseRecord


@dataclass
class Page:
    """One page of a list; pass ``next_page_token`` back for the next."""

    leases: List[LeaseRecord]
    next_page_token: Optional[str]


@dataclass
class CommitResult:
    """An accepted fenced commit: one result per write, in request order."""

    lease_id: str
    fencing_token: int
    results: List[Dict[str, Any]]
    replayed: bool = False
    request_id: Optional[str] = None
    correlation_id: Optional[str] = None


def document(key: str, body: Dict[str, Any], expected_revision: int = 0) -> Dict[str, Any]:
    """A document write of a commit (expected_revision 0: must not exist yet)."""
    return {"kind": "document", "key": key, "expected_revision": expected_revision, "body": body}


def publication(topic: str, payload: Dict[str, Any]) -> Dict[str, Any]:
    """A publication of a commit (delivered by leased-relay, docs/relay.md)."""
    return {"kind": "publication", "topic": topic, "payload": payload}
