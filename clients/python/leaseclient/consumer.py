"""Drops duplicate and stale deliveries of leased-relay messages
(docs/relay.md, "Consumers"; the same rules as the C client's consumer.h).

    seen = Consumer()
    d = parse_delivery(properties.message_id, properties.headers, body)  # InvalidDelivery: reject
    verdict = seen.classify(d)
    if verdict is Verdict.NEW:
        apply(d.payload)        # your effect
        seen.record(d)          # only once it is durable
    ack()                       # duplicates and stale ones too: nothing to do

- duplicate: its message id (the outbox id) was recorded;
- stale: a higher fencing token of its lock identity was recorded (a newer
  holder has published). Equal tokens are one lease's publications: all new.

State is in memory: the message ids of the last ``window`` recorded
deliveries and the highest recorded token per identity. A consumer that
restarts or runs as several processes keeps both in its own database, in the
transaction that applies the effect (docs/relay.md has the SQL).
"""
import collections
import enum
import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Deque, Dict, Mapping, Optional, Set, Tuple, Union

from .types import IDENTITY_FIELDS, Identity

DEFAULT_WINDOW = 65536
_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_OPERATION_CLASSES = ("default", "collect", "enrich", "publish", "maintenance")


class InvalidDelivery(ValueError):
    """The message is not one of leased-relay's (or was tampered with): ``field`` names
    the missing or malformed part. Reject it (dead-letter)."""

    def __init__(self, field: str) -> None:
        super().__init__(f"invalid relay message: {field}")
        self.field = field


class Verdict(enum.Enum):
    NEW = "new"
    DUPLICATE = "duplicate"
    STALE = "stale"


@dataclass(frozen=True)
class Delivery:
    outbox_id: int  # the AMQP message_id
    identity: Identity  # normalised
    fencing_token: int
    lease_id: str
    trace_id: Optional[str]
    payload: Any = None  # the message body, parsed (the relay publishes a JSON object)


HeaderValue = Union[str, bytes, int]


def _text(value: Any) -> Optional[str]:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def _positive(value: Any) -> Optional[int]:
    s = _text(value)
    if s is None or not s or s[0] == "0" or len(s) > 19 or not s.isascii() or not s.isdigit():
        return None
    n = int(s)
    return n if n <= 2**63 - 1 else None


_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_TARGET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")


def _normalise(field: str, value: Optional[str]) -> Optional[str]:
    """A component by the rules of the lock identity (ASCII folding where the
    rule folds; nothing repaired)."""
    if value is None or not value.isascii():
        return None
    if field == "target_id":
        ok = len(value) <= 128 and _TARGET.match(value) and ".." not in value
        return value if ok else None
    v = value.lower()
    if field == "operation_class":
        return v if v in _OPERATION_CLASSES else None
    rule = _NAMESPACE if field == "target_namespace" else _NAME
    ok = len(v) <= 64 and rule.match(v) and ".." not in v
    return v if ok else None


def parse_delivery(message_id: Union[str, int, bytes, None],
                   headers: Optional[Mapping[str, HeaderValue]],
                   payload: Union[bytes, str, None] = None) -> Delivery:
    """Reads a delivery from the AMQP message_id and headers (strings, bytes or
    integers, as AMQP clients give them) and, when given, its body (JSON).
    Raises InvalidDelivery."""
    headers = headers or {}
    body: Any = None
    if payload is not None:
        try:
            body = json.loads(payload)
        except ValueError as e:  # also UnicodeDecodeError
            raise InvalidDelivery("payload") from e
    outbox_id = _positive(message_id)
    if outbox_id is None:
        raise InvalidDelivery("message_id")
    token = _positive(headers.get("fencing_token"))
    if token is None:
        raise InvalidDelivery("fencing_token")
    lease_id = _text(headers.get("lease_id"))
    if lease_id is None or not _ID_RE.match(lease_id):
        raise InvalidDelivery("lease_id")
    trace_id = None
    if headers.get("trace_id") is not None:
        trace_id = _text(headers.get("trace_id"))
        if trace_id is None or not _ID_RE.match(trace_id):
            raise InvalidDelivery("trace_id")
    parts: Dict[str, str] = {}
    for f in IDENTITY_FIELDS:
        v = _normalise(f, _text(headers.get(f)))
        if v is None:  # operation_class too: the relay always sends it
            raise InvalidDelivery(f)
        parts[f] = v
    return Delivery(outbox_id, Identity(**parts), token, lease_id, trace_id, body)


class Consumer:
    """Duplicate and stale detection; thread-safe."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        if window <= 0:
            raise ValueError("window must be positive")
        self.window = window
        self._lock = threading.Lock()
        self._ids: Set[int] = set()
        self._order: Deque[int] = collections.deque()
        self._max_token: Dict[Tuple[str, ...], int] = {}

    @staticmethod
    def _key(identity: Identity) -> Tuple[str, ...]:
        return tuple(str(getattr(identity, f)) for f in IDENTITY_FIELDS)

    def classify(self, d: Delivery) -> Verdict:
        """The verdict on d; changes nothing. Duplicate is checked before stale."""
        with self._lock:
            if d.outbox_id in self._ids:
                return Verdict.DUPLICATE
            top = self._max_token.get(self._key(d.identity))
            if top is not None and d.fencing_token < top:
                return Verdict.STALE
            return Verdict.NEW

    def record(self, d: Delivery) -> None:
        """Records d as applied: its id as seen (the oldest of ``window`` forgotten
        first), its token as its identity's highest (never lowered)."""
        with self._lock:
            key = self._key(d.identity)
            if d.fencing_token > self._max_token.get(key, 0):
                self._max_token[key] = d.fencing_token
            if d.outbox_id in self._ids:
                return
            if len(self._order) >= self.window:
                self._ids.discard(self._order.popleft())
            self._ids.add(d.outbox_id)
            self._order.append(d.outbox_id)
