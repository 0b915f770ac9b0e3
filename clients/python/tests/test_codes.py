"""Every code of the closed result set maps to its typed exception: each one
provoked for real where a test can, and the set itself compared with the
service's table (src/core/result.c)."""
import datetime
import os
import re

import pytest

from leased_proc import LeasedProc, credential
from leaseclient import (AccessDenied, BackendUnavailable, Client, DeadlineExceeded,
                         ERRORS_BY_CODE, IdempotencyConflict, Identity, InvalidCredential,
                         InvalidLeaseRequest, LeaseConflict, LeaseError, LeaseLost,
                         LeaseNotFound, OutcomeUnknown, RateLimited, WriteConflict, document)
from leaseclient.errors import SUCCESS_CODES

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")


def test_the_closed_set_is_the_services():
    with open(os.path.join(ROOT, "src", "core", "result.c")) as f:
        names = set(re.findall(r'"([a-z_]+)"', f.read()))
    wire = {n for n in names if n in SUCCESS_CODES or n in ERRORS_BY_CODE or
            n.startswith(("lease_", "commit_", "invalid_", "access_", "deadline_",
                          "idempotency_", "write_"))}
    assert set(ERRORS_BY_CODE) | SUCCESS_CODES == wire
    assert len(ERRORS_BY_CODE) == 12
    for code, cls in ERRORS_BY_CODE.items():
        assert issubclass(cls, LeaseError) and cls.code == code
    assert len(set(ERRORS_BY_CODE.values())) == 12  # one class per code


def test_each_code_raised_for_real(leased, tokens, identity):
    c = Client(leased.url, tokens["worker"])
    ident = identity()

    with pytest.raises(InvalidLeaseRequest) as e:
        c.acquire(Identity("tenant-main", "program-a", "py-target", "bad/target", "pyworker",
                           "default"))
    assert e.value.field == "lock_identity.target_id" and e.value.http_status == 400

    with pytest.raises(InvalidCredential):
        Client(leased.url, "lsk_nope_nope").acquire(ident)

    with pytest.raises(AccessDenied):
        c.acquire(Identity("tenant-main", "program-b", "py-target", "x1", "pyworker", "default"))

    with pytest.raises(LeaseNotFound):
        c.inspect("lease_00000000000000000000000000000000")

    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    with pytest.raises(DeadlineExceeded) as d:
        c.acquire(ident, deadline_at=past)
    assert d.value.http_status == 408 and d.value.retryable

    lease = c.acquire(ident, ttl_ms=30000)
    with pytest.raises(LeaseConflict) as cf:
        Client(leased.url, tokens["other"]).acquire(ident)
    assert cf.value.retry_after_ms and cf.value.retry_after_ms > 0

    from dataclasses import replace
    with pytest.raises(LeaseLost):
        c.renew(replace(lease, fencing_token=lease.fencing_token + 7))

    c.renew(lease, request_id="py-idem-1", ttl_ms=30000)
    with pytest.raises(IdempotencyConflict):
        c.renew(lease, request_id="py-idem-1", ttl_ms=20000)

    with pytest.raises(WriteConflict) as w:
        c.commit(lease, [document("py-doc-" + lease.lease_id, {"x": 1}, expected_revision=5)])
    assert w.value.current_revision == 0 and w.value.field == "writes[0].expected_revision"
    c.release(lease)


def test_rate_limited(identity):
    srv = LeasedProc({"LEASE_RATE_LIMIT": "1/s"})
    try:
        c = Client(srv.url, credential("prn_py_rate"))
        with pytest.raises(LeaseNotFound):
            c.inspect("lease_00000000000000000000000000000001")
        with pytest.raises(RateLimited) as e:
            c.inspect("lease_00000000000000000000000000000001")
        assert e.value.retryable and 0 < e.value.retry_after_ms <= 1001
    finally:
        srv.stop()


def test_backend_unavailable(tokens, identity):
    # a leased whose database cannot be reached: nothing can be submitted
    srv = LeasedProc({"LEASE_DB_CONNECT_TIMEOUT_MS": "200"}, wait_ready=False,
                     database_url="postgresql://leased_app@127.0.0.1:1/nowhere")
    try:
        c = Client(srv.url, tokens["worker"])
        with pytest.raises(BackendUnavailable) as e:
            c.inspect_identity(identity(), deadline_ms=3000)
        assert e.value.http_status == 503
        # a mutation that was refused before anything was submitted stays
        # backend_unavailable: the client does not guess "unknown"
        with pytest.raises(BackendUnavailable):
            c.acquire(identity(), deadline_ms=3000)
    finally:
        srv.stop()


def test_client_side_codes(tokens, identity):
    # nobody listens: nothing was sent, so backend unavailable, not unknown
    c = Client("http://127.0.0.1:1", tokens["worker"])
    with pytest.raises(BackendUnavailable) as e:
        c.acquire(identity(), deadline_ms=500)
    assert e.value.http_status is None
    with pytest.raises(InvalidLeaseRequest):
        c.acquire(identity(), deadline_ms=0)
    assert issubclass(OutcomeUnknown, LeaseError)  # raised for real in test_scenario


def test_outcome_unknown_answered_by_the_service(tokens, identity):
    """leased's database session is terminated while a renew it sent waits
    inside the database: leased answers 503 lease_outcome_unknown; the client
    repeats the request id until its deadline, then raises OutcomeUnknown;
    the same request id resolves it once the database can answer."""
    from leased_proc import RowLock, psql
    srv = LeasedProc({"LEASE_DB_CONNECT_TIMEOUT_MS": "500"})
    try:
        c = Client(srv.url, tokens["worker"])
        ident = identity()
        lease = c.acquire(ident, ttl_ms=30000)
        lock = RowLock(f"SELECT 1 FROM lease.locks WHERE target_id = '{ident.target_id}' "
                       "FOR UPDATE")
        import threading
        import time
        outcome = {}

        def renew() -> None:
            try:
                outcome["lease"] = c.renew(lease, deadline_ms=3000)
            except Exception as e:  # noqa: BLE001 - asserted below
                outcome["error"] = e
        t = threading.Thread(target=renew)
        t.start()
        # the session of this renew: the only leased session waiting on a lock
        waiting = ("FROM pg_stat_activity WHERE datname = current_database() AND "
                   "application_name = 'leased' AND wait_event_type = 'Lock' AND "
                   "query LIKE '%lease.renew%'")
        end = time.monotonic() + 10
        while psql("SELECT count(*) " + waiting) == "0":
            assert time.monotonic() < end, "the renew never waited in the database"
            time.sleep(0.02)
        assert psql("SELECT count(pg_terminate_backend(pid)) " + waiting) == "1"
        t.join(10)
        lock.release()
        err = outcome.get("error")
        assert isinstance(err, OutcomeUnknown), outcome
        assert err.request_id
        import urllib.request
        with urllib.request.urlopen(srv.url + "/metrics", timeout=5) as r:
            metrics = r.read().decode()
        assert 'leased_http_requests_total{route="renew",code="lease_outcome_unknown"}' in metrics
        renewed = c.renew(lease, request_id=err.request_id)
        assert (renewed.lease_id, renewed.fencing_token) == (lease.lease_id, lease.fencing_token)
        assert c.renew(lease, request_id=err.request_id).replayed
        c.release(renewed)
    finally:
        srv.stop()
