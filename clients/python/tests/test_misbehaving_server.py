"""The client against a server that misbehaves (misbehaving_server.py, on
loopback in this process): each exchange is bounded as a whole, an answer's
size is capped, wrong JSON types are refused as typed errors, and a reset
after the request was sent is an unknown outcome resolved by the request id.

Bounds are asserted generously (a loaded 2-core machine): a hold with a
1.5 s TTL whose renewals meet the misbehaviour must be lost before
1.5 s + 1.5 s (the client's cancel point is 1.35 s); a call with a 1 s
deadline must end before 2.5 s. The TTL is short because most cases wait
until that cancel point: the schedule it gives (renewal at ~0.5 s, each
attempt's answer due half-way to the cancel point, retries from 100 ms)
still leaves room for the retries the cases count."""
import os
import subprocess
import sys
import time

import pytest

from misbehaving_server import HUGE_BYTES, MisbehavingServer

from leaseclient import (MAX_ANSWER_BYTES, BackendUnavailable, Client, DeadlineExceeded,
                         Identity, LeaseConflict, LeaseError, OutcomeUnknown, document)
from leaseclient.types import LeaseRecord

TTL_MS = 1500
HOLD_BOUND_S = TTL_MS / 1000 + 1.5
CALL_DEADLINE_MS = 1000
CALL_BOUND_S = 2.5
TOKEN = "lsk_fake_token"


def _held_lease(identity: Identity) -> LeaseRecord:
    return LeaseRecord(identity=identity, lease_id="lease_fake0001", fencing_token=7)


@pytest.mark.parametrize("how", ["slow_head", "slow_body", "huge", "huge_unframed",
                                 "wrong_types", "reset"])
def test_a_hold_whose_renewals_misbehave_is_lost_within_its_ttl(identity, how):
    server = MisbehavingServer(lambda r: how if r.path == "/v1/leases/renew" else None,
                               ttl_ms=TTL_MS)
    try:
        client = Client(server.url, TOKEN)
        start = time.monotonic()
        with client.hold(identity(), ttl_ms=TTL_MS, watch=False) as lease:
            lost = lease.lost.wait(HOLD_BOUND_S + 3)
            at = time.monotonic() - start
            print(f"\nrenewals answered {how}: lost {lost} after {at:.2f} s "
                  f"({lease.reason}, {lease.code}: {getattr(lease, 'detail', None)})")
            assert lost, f"{how}: still held {at:.1f} s into a {TTL_MS} ms TTL"
            assert at < HOLD_BOUND_S, f"{how}: lost only {at:.2f} s into a {TTL_MS} ms TTL"
            assert lease.reason == "unconfirmed" and lease.code == "lease_outcome_unknown"
            assert server.seen.count("POST /v1/leases/renew") >= 1
    finally:
        server.close()


@pytest.mark.parametrize("how", ["slow_head", "slow_body"])
def test_a_call_is_bounded_by_its_deadline_as_a_whole(identity, how):
    server = MisbehavingServer(lambda r: how)
    try:
        client = Client(server.url, TOKEN)
        start = time.monotonic()
        with pytest.raises(BackendUnavailable):
            client.inspect("lease_fake0001", deadline_ms=CALL_DEADLINE_MS)
        took = time.monotonic() - start
        print(f"\ninspect against {how}: refused after {took:.2f} s "
              f"(deadline {CALL_DEADLINE_MS} ms)")
        assert took < CALL_BOUND_S
    finally:
        server.close()


_MEASURE = r"""
import resource, sys, time
sys.path.insert(0, sys.argv[1])
from leaseclient import Client, LeaseError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
try:
    Client(sys.argv[2], "lsk_fake").inspect("lease_fake0001", deadline_ms=20000)
    outcome = "answered"
except LeaseError as e:
    outcome = type(e).__name__ + ": " + str(e)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(after - before, round(time.monotonic() - start, 2), outcome)
"""


@pytest.mark.parametrize("how", ["huge", "huge_unframed"])
def test_an_answer_larger_than_the_cap_is_refused_without_reading_it(how):
    """256 MiB offered (with a Content-Length, or until the connection
    closes): refused at MAX_ANSWER_BYTES (8 MiB, the Go client's cap). Peak
    memory of a process that makes the call, measured in a child."""
    server = MisbehavingServer(lambda r: how)
    try:
        project = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run([sys.executable, "-c", _MEASURE, project, server.url],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        grew_kib, took, outcome = out.stdout.split(" ", 2)
        time.sleep(0.5)  # the server's writes end at the reset
        sent = server.body_bytes_sent
        print(f"\n{how}: {HUGE_BYTES >> 20} MiB offered, {sent / 2**20:.1f} MiB written before "
              f"the client closed, peak memory +{int(grew_kib) / 1024:.1f} MiB, "
              f"{took} s: {outcome.strip()}")
        assert outcome.startswith("BackendUnavailable"), outcome
        assert int(grew_kib) * 1024 < MAX_ANSWER_BYTES * 3
        # what the client read, plus what loopback's socket buffers hold
        assert sent < MAX_ANSWER_BYTES + 48 * 2**20
    finally:
        server.close()


def test_wrong_types_in_a_success_are_a_typed_error(identity):
    server = MisbehavingServer(lambda r: "wrong_types" if r.path == "/v1/leases/acquire" else None)
    try:
        client = Client(server.url, TOKEN)
        start = time.monotonic()
        with pytest.raises(LeaseError) as caught:
            with client.hold(identity(), ttl_ms=TTL_MS, deadline_ms=CALL_DEADLINE_MS):
                pass
        print(f"\nacquire answered with wrong types: {type(caught.value).__name__}: "
              f"{caught.value}")
        # an unreadable success to a mutation: it may have happened
        assert isinstance(caught.value, OutcomeUnknown) and caught.value.request_id
        assert time.monotonic() - start < CALL_BOUND_S
    finally:
        server.close()


def test_wrong_types_in_an_error_are_not_passed_on(identity):
    server = MisbehavingServer(lambda r: "wrong_error_types")
    try:
        with pytest.raises(LeaseConflict) as caught:
            Client(server.url, TOKEN).acquire(identity(), deadline_ms=CALL_DEADLINE_MS)
        e = caught.value
        print(f"\nlease_conflict with wrong types: retry_after_ms {e.retry_after_ms!r}, "
              f"field {e.field!r}, retryable {e.retryable!r}, "
              f"correlation_id {e.correlation_id!r}, message {str(e)!r}")
        assert e.retry_after_ms is None and e.field is None and e.correlation_id is None
        assert isinstance(e.retryable, bool) and isinstance(str(e), str)
    finally:
        server.close()


def test_a_reset_after_the_request_was_sent_is_an_unknown_outcome(identity):
    server = MisbehavingServer(lambda r: "reset")
    try:
        client = Client(server.url, TOKEN)
        start = time.monotonic()
        with pytest.raises(OutcomeUnknown) as caught:
            client.commit(_held_lease(identity()), [document("k", {"ok": True})],
                          deadline_ms=CALL_DEADLINE_MS)
        took = time.monotonic() - start
        rid = caught.value.request_id
        print(f"\ncommit reset after sending: OutcomeUnknown after {took:.2f} s, "
              f"{len(server.request_ids)} sends of {rid}")
        assert took < CALL_BOUND_S
        assert len(server.request_ids) >= 2 and set(server.request_ids) == {rid}
        with pytest.raises(BackendUnavailable):  # a read: nothing to resolve
            client.inspect("lease_fake0001", deadline_ms=CALL_DEADLINE_MS)
    finally:
        server.close()


# ----------------------------------------------------------------------
# sessions (issue 37): the hold's one keep-alive, and the session calls

KEEPALIVE_BOUND_S = HOLD_BOUND_S


def _keepalive(r) -> bool:
    return r.path.endswith("/keepalive")


@pytest.mark.parametrize("how", ["slow_head", "reset", "bare_503", "wrong_session_types",
                                 "lease_instead_of_session"])
def test_holds_whose_keepalives_misbehave_are_lost_within_the_ttl(identity, how):
    """Each keep-alive meets the misbehaviour: an unknown outcome, retried
    until the session's cancel point; then every hold of the session is
    over, unconfirmed, before the service's expiry could pass."""
    server = MisbehavingServer(lambda r: how if _keepalive(r) else None, ttl_ms=TTL_MS)
    try:
        client = Client(server.url, TOKEN)
        start = time.monotonic()
        holds = [client.hold(identity(), ttl_ms=TTL_MS) for _ in range(3)]
        leases = [h.start() for h in holds]
        for lease in leases:
            lost = lease.lost.wait(HOLD_BOUND_S + 3)
            at = time.monotonic() - start
            assert lost, f"{how}: still held {at:.1f} s into a {TTL_MS} ms TTL"
            assert at < KEEPALIVE_BOUND_S, f"{how}: lost only {at:.2f} s into {TTL_MS} ms"
            assert (lease.reason, lease.code) == ("unconfirmed", "lease_outcome_unknown")
        keeps = [s for s in server.seen if s.endswith("/keepalive")]
        print(f"\nkeep-alives answered {how}: {len(keeps)} sent, 3 holds lost after "
              f"{time.monotonic() - start:.2f} s ({leases[0].detail})")
        assert len(keeps) >= 1
        assert not any(s == "POST /v1/leases/renew" for s in server.seen)
        if how in ("reset", "bare_503", "wrong_session_types", "lease_instead_of_session"):
            assert len(keeps) >= 2  # an unknown outcome is asked again
        for h in holds:
            h.__exit__(None, None, None)
    finally:
        server.close()


@pytest.mark.parametrize("how", ["session_lost", "session_closed"])
def test_a_keepalive_answered_lost_loses_every_hold_at_once(identity, how):
    server = MisbehavingServer(lambda r: how if _keepalive(r) else None, ttl_ms=TTL_MS)
    try:
        client = Client(server.url, TOKEN)
        holds = [client.hold(identity(), ttl_ms=TTL_MS) for _ in range(3)]
        leases = [h.start() for h in holds]
        window = leases[0].window
        for lease in leases:
            assert lease.lost.wait(HOLD_BOUND_S)
            assert (lease.reason, lease.code) == ("lost", "lease_lost")
        at = time.monotonic()
        keeps = [s for s in server.seen if s.endswith("/keepalive")]
        print(f"\nkeep-alive answered {how}: {len(keeps)} keep-alive, every hold lost "
              f"{(window.cancel - at) * 1000:.0f} ms before its cancel point "
              f"({leases[0].detail})")
        assert len(keeps) == 1 and at < window.cancel
        for h in holds:
            h.__exit__(None, None, None)
    finally:
        server.close()


@pytest.mark.parametrize("where", ["open", "acquire"])
def test_a_service_without_sessions_is_renewed_per_lease(identity, where):
    """leased on Valkey answers a session route, or an acquire naming
    session_id, 400 invalid_lease_request (field session_id): the hold
    renews per lease, and the client remembers it."""
    def rule(r):
        if where == "open" and r.path.startswith("/v1/sessions"):
            return "sessions_refused"
        if where == "acquire" and r.path == "/v1/leases/acquire" and "session_id" in r.body:
            return "sessions_refused"
        return None
    server = MisbehavingServer(rule, ttl_ms=TTL_MS)
    try:
        client = Client(server.url, TOKEN)
        with client.hold(identity(), ttl_ms=TTL_MS) as lease:
            # its first renewal (due at a third of the TTL), waited for
            # rather than slept for: a loaded machine may run it late
            until = time.monotonic() + HOLD_BOUND_S
            while lease.renewals < 1 and not lease.lost.is_set() and time.monotonic() < until:
                time.sleep(0.02)
            assert not lease.lost.is_set() and lease.renewals >= 1
        with client.hold(identity(), ttl_ms=TTL_MS):
            pass
        opens = server.seen.count("POST /v1/sessions")
        acquires = server.seen.count("POST /v1/leases/acquire")
        print(f"\nsessions refused at {where}: {server.seen}")
        assert client._renewal_group().sessions_refused
        assert opens == 1  # asked once, remembered
        assert acquires == (3 if where == "acquire" else 2)
        assert "POST /v1/leases/renew" in server.seen
    finally:
        server.close()


@pytest.mark.parametrize("how", ["wrong_session_types", "lease_instead_of_session", "reset"])
def test_session_calls_refuse_answers_of_the_wrong_shape(how):
    server = MisbehavingServer(lambda r: how)
    try:
        client = Client(server.url, TOKEN)
        with pytest.raises(OutcomeUnknown) as opened:
            client.session_open(ttl_ms=TTL_MS, deadline_ms=CALL_DEADLINE_MS)
        assert opened.value.request_id
        start = time.monotonic()
        with pytest.raises(OutcomeUnknown) as kept:
            client.session_keepalive("session_fake0001", deadline_ms=CALL_DEADLINE_MS)
        took = time.monotonic() - start
        print(f"\nsession calls answered {how}: {type(kept.value).__name__} after "
              f"{took:.2f} s: {kept.value}")
        assert took < CALL_BOUND_S
        with pytest.raises(OutcomeUnknown):
            client.session_close("session_fake0001", deadline_ms=CALL_DEADLINE_MS)
        # a keep-alive carries no request id (the route takes none)
        keeps = [s for s in server.seen if s.endswith("/keepalive")]
        assert keeps
    finally:
        server.close()


def test_a_session_keepalive_never_sends_a_request_id():
    server = MisbehavingServer(lambda r: None)
    try:
        got = Client(server.url, TOKEN).session_keepalive("session_fake0001")
        assert got.session_id == "session_fake0001" and got.state == "open"
        assert server.request_ids == []
    finally:
        server.close()


def test_a_refused_session_call_is_the_typed_error():
    server = MisbehavingServer(lambda r: "sessions_refused")
    try:
        from leaseclient import InvalidLeaseRequest
        with pytest.raises(InvalidLeaseRequest) as caught:
            Client(server.url, TOKEN).session_open(deadline_ms=CALL_DEADLINE_MS)
        assert caught.value.field == "session_id"
    finally:
        server.close()


# ----------------------------------------------------------------------
# the cause a hold reports (docs/clients.md, "Sessions"): an unknown outcome
# stays it when a later retry only ran out of time (the Go client's
# noteFailure, TestAnUnknownOutcomeStaysTheCauseWhenARetryRunsOutOfTime)

# What the keep-alives (or per-lease renewals) meet: the server's answers to
# the first ones, then what every later attempt meets, then the cause the
# hold reports. The later attempts' failure must be the same however close
# to the cancel point they come (an attempt with a few ms left may time out
# after it was sent, an unknown outcome, or while connecting): "late", each
# runs out of time before it is sent (the client's own DeadlineExceeded,
# made as the transport makes it), or "unreachable", the server stops
# listening (every connect refused: BackendUnavailable).
_UNKNOWN_THEN = {
    # an unreadable success (the outcome unknown), then leased's 408s and
    # attempts too late to be sent: the first may still have happened
    "deadline_exceeded": (["unknown", "deadline_exceeded", "deadline_exceeded"], "late",
                          "lease_outcome_unknown"),
    # any other later failure is news: it is the cause
    "unreachable": (["unknown", "deadline_exceeded"], "unreachable",
                    "lease_backend_unavailable"),
}


@pytest.mark.parametrize("then", sorted(_UNKNOWN_THEN))
@pytest.mark.parametrize("via", ["keepalive", "renewal"])
def test_an_unknown_outcome_stays_the_cause_when_a_retry_runs_out_of_time(identity, via, then):
    answers, later, cause = _UNKNOWN_THEN[then]
    unknown = "lease_instead_of_session" if via == "keepalive" else "wrong_types"
    call = "_session_keepalive" if via == "keepalive" else "_renew"
    sent, late = [], []
    client = None

    def too_late(*args, **kw):
        late.append(1)
        raise DeadlineExceeded("the call's deadline passed before it was sent")

    def rule(r):
        if not (_keepalive(r) if via == "keepalive" else r.path == "/v1/leases/renew"):
            return None
        sent.append(r.path)
        how = answers[min(len(sent), len(answers)) - 1]
        if len(sent) == len(answers):  # the last the server answers
            if later == "late":
                setattr(client, call, too_late)
            else:
                server.close()  # this connection is answered still
        return unknown if how == "unknown" else how
    server = MisbehavingServer(rule, ttl_ms=TTL_MS)
    try:
        client = Client(server.url, TOKEN)
        start = time.monotonic()
        with client.hold(identity(), ttl_ms=TTL_MS, watch=via == "keepalive") as lease:
            lost = lease.lost.wait(HOLD_BOUND_S + 3)
            at = time.monotonic() - start
            print(f"\n{via}s answered unknown, then {then}: {len(sent)} sent, {len(late)} too "
                  f"late to send; lost {lost} after {at:.2f} s ({lease.reason}, {lease.code}: "
                  f"{lease.detail})")
            assert lost and at < HOLD_BOUND_S
            assert len(sent) == len(answers)  # every answer of the sequence was met
            assert (lease.reason, lease.code) == ("unconfirmed", cause)
            if later == "late":
                assert late
    finally:
        server.close()
