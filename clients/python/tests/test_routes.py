"""Every route of docs/api.md through Client, against a real leased."""
import datetime

import pytest

from leased_proc import PROGRAM, TENANT
from leaseclient import (Client, LeaseConflict, LeaseLost, document, publication)


def test_acquire_renew_release_inspect(leased, tokens, identity):
    c = Client(leased.url, tokens["worker"])
    ident = identity()
    lease = c.acquire(ident, ttl_ms=10000)
    assert lease.code == "lease_acquired" and lease.state == "active"
    assert lease.fencing_token >= 1 and lease.lease_id.startswith("lease_")
    assert lease.grant_ms == 10000
    renewed = c.renew(lease, ttl_ms=20000)
    assert renewed.code == "lease_renewed"
    assert (renewed.lease_id, renewed.fencing_token) == (lease.lease_id, lease.fencing_token)
    assert renewed.expires_at > lease.expires_at
    assert c.inspect(lease.lease_id).state == "active"
    assert c.inspect_identity(ident).lease_id == lease.lease_id
    released = c.release(renewed)
    assert released.state == "released"
    with pytest.raises(LeaseLost):
        c.renew(lease)
    assert c.inspect(lease.lease_id).state == "released"
    again = c.acquire(ident)
    assert again.fencing_token > lease.fencing_token
    c.release(again)


def test_a_released_leases_watch_answers_at_once(leased, tokens, identity):
    c = Client(leased.url, tokens["worker"])
    lease = c.acquire(identity(), ttl_ms=10000)
    c.release(lease)
    assert c.watch(lease.lease_id, wait_ms=5000).state == "released"


def test_replay_by_request_id(leased, tokens, identity):
    c = Client(leased.url, tokens["worker"])
    ident = identity()
    first = c.acquire(ident, request_id="py-replay-1", execution_id="e1", job_id="j1")
    again = c.acquire(ident, request_id="py-replay-1", execution_id="e1", job_id="j1")
    assert again.replayed and again.current_state == "active"
    assert (again.lease_id, again.fencing_token) == (first.lease_id, first.fencing_token)
    with pytest.raises(LeaseConflict):
        c.acquire(ident)
    c.release(first)


def test_list_pages(leased, tokens, identity):
    c = Client(leased.url, tokens["other"])
    held = [c.acquire(identity()) for _ in range(5)]
    page = c.list("owner", page_size=2)
    assert len(page.leases) == 2 and page.next_page_token
    ids = [x.lease_id for x in c.list_all("owner", page_size=2)]
    assert sorted(ids) == sorted(x.lease_id for x in held)
    by_program = c.list("program", tenant_id=TENANT, program_id=PROGRAM, page_size=100)
    assert {x.lease_id for x in held} <= {x.lease_id for x in by_program.leases}
    tgt = c.list("target", tenant_id=TENANT, program_id=PROGRAM,
                 target_namespace=held[0].identity.target_namespace,
                 target_id=held[0].identity.target_id)
    assert [x.lease_id for x in tgt.leases] == [held[0].lease_id]
    for x in held:
        c.release(x)
    assert c.list("owner").leases == []


def test_commit_documents(leased, tokens, identity):
    c = Client(leased.url, tokens["worker"])
    lease = c.acquire(identity())
    key = f"py/doc/{lease.lease_id}"
    res = c.commit(lease, [document(key, {"ok": True})], request_id="py-commit-doc-1")
    assert res.fencing_token == lease.fencing_token
    assert res.results == [{"kind": "document", "key": key, "revision": 1}]
    again = c.commit(lease, [document(key, {"ok": True})], request_id="py-commit-doc-1")
    assert again.replayed and again.results == res.results
    c.release(lease)


def test_commit_documents_and_publications(leased, tokens, identity):
    c = Client(leased.url, tokens["worker"])
    lease = c.acquire(identity())
    res = c.commit(lease, [document(f"py/{lease.lease_id}", {"ok": True}),
                           publication("py.results", {"n": 1})], request_id="py-commit-1")
    assert res.fencing_token == lease.fencing_token
    assert res.results[0] == {"kind": "document", "key": f"py/{lease.lease_id}", "revision": 1}
    assert res.results[1]["kind"] == "publication" and res.results[1]["outbox_id"] >= 1
    again = c.commit(lease, [document(f"py/{lease.lease_id}", {"ok": True}),
                             publication("py.results", {"n": 1})], request_id="py-commit-1")
    assert again.replayed and again.results == res.results
    c.release(lease)


def test_admin_force_release_and_revoke(leased, tokens, identity):
    w = Client(leased.url, tokens["worker"])
    a = Client(leased.url, tokens["admin"])
    one = w.acquire(identity())
    assert a.force_release(one, reason="py test").state == "released"
    two = w.acquire(identity())
    assert a.revoke(two, reason="py test", incident_id="inc-py").state == "revoked"
    with pytest.raises(LeaseLost):
        w.renew(two)


def test_deadline_at_in_the_future_is_sent(leased, tokens, identity):
    c = Client(leased.url, tokens["worker"])
    soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=5)
    lease = c.acquire(identity(), deadline_at=soon)
    c.release(lease)
