"""leaseclient: the Python client of leased (standard library only).

    from leaseclient import Client, document
    client = Client()                      # LEASE_URL, LEASE_TOKEN
    with client.hold(identity, ttl_ms=30000, wait_ms=5000) as lease:
        ...                                # lease.lost is set when it is lost
        lease.commit([document("result/1", {"ok": True})])

The names (docs/clients.md, "Names"): a LeaseRecord is a lease as the
service answered it; a HeldLease is a lease this process holds, renewed in
the background (what ``with client.hold(...)`` gives; Hold is the context
manager); renew_many/release_many are the batch calls. ``Lease`` is the
deprecated earlier name of LeaseRecord.

docs/clients.md describes it.
"""
import logging

from .aio import AsyncHold
from .client import Client, new_id, new_trace_id
from .consumer import Consumer, Delivery, InvalidDelivery, Verdict, parse_delivery
from .errors import (
    ERRORS_BY_CODE,
    AccessDenied,
    BackendUnavailable,
    DeadlineExceeded,
    IdempotencyConflict,
    InvalidCredential,
    InvalidLeaseRequest,
    LeaseConflict,
    LeaseError,
    LeaseLost,
    LeaseNotFound,
    OutcomeUnknown,
    RateLimited,
    WriteConflict,
)
from .hold import HeldLease, Hold
from .transport import MAX_ANSWER_BYTES
from .types import (CommitResult, Identity, Lease, LeaseRecord, Page, SessionRecord, document,
                    publication)

__version__ = "0.1.0"

# a library logs to "leaseclient" only where the application asks it to
logging.getLogger("leaseclient").addHandler(logging.NullHandler())

__all__ = [
    "AccessDenied", "AsyncHold", "BackendUnavailable", "Client", "CommitResult", "Consumer",
    "DeadlineExceeded", "Delivery", "ERRORS_BY_CODE", "HeldLease", "Hold", "IdempotencyConflict",
    "Identity", "InvalidCredential", "InvalidDelivery", "InvalidLeaseRequest", "Lease",
    "LeaseRecord",
    "LeaseConflict", "LeaseError", "LeaseLost", "LeaseNotFound", "MAX_ANSWER_BYTES", "OutcomeUnknown",
    "Page",
    "RateLimited", "SessionRecord", "Verdict", "WriteConflict", "document", "new_id", "new_trace_id",
    "parse_delivery", "publication",
]
