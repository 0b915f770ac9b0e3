"""Many leases, one call (issue 20): renew_many and release_many, and the
holds of one Client renewed in one renew-batch per period, observed in
leased's own request counters (GET /metrics)."""
import dataclasses
import re
import time
import urllib.request

import pytest

from leased_proc import LeasedProc
from leaseclient import Client, IdempotencyConflict, LeaseRecord, LeaseLost


@pytest.fixture(scope="module")
def own_leased():
    """A leased of this module alone, so its counters are this module's."""
    p = LeasedProc()
    yield p
    p.stop()


def requests_of(leased: LeasedProc, route: str) -> int:
    """leased_http_requests_total of a route, summed over its codes."""
    with urllib.request.urlopen(leased.url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    pattern = r'^leased_http_requests_total\{route="%s",[^}]*\} (\d+)' % re.escape(route)
    return sum(int(m) for m in re.findall(pattern, text, re.M))


def test_renew_many_and_release_many(own_leased, tokens, identity):
    c = Client(own_leased.url, tokens["worker"])
    a, b = c.acquire(identity(), ttl_ms=30000), c.acquire(identity(), ttl_ms=30000)
    stale = dataclasses.replace(a, fencing_token=a.fencing_token + 7)
    before = requests_of(own_leased, "renew_batch")
    out = c.renew_many([a, stale, b], request_ids=["py-rm-1", "py-rm-2", "py-rm-3"])
    assert requests_of(own_leased, "renew_batch") == before + 1  # one call
    assert isinstance(out[0], LeaseRecord) and out[0].lease_id == a.lease_id
    assert isinstance(out[1], LeaseLost)  # one item's loss ...
    assert isinstance(out[2], LeaseRecord) and out[2].lease_id == b.lease_id  # ... not the others'
    again = c.renew_many([a, stale, b], request_ids=["py-rm-1", "py-rm-2", "py-rm-3"])
    assert isinstance(again[0], LeaseRecord) and again[0].replayed
    other = c.renew_many([b], ttl_ms=40000, request_ids=["py-rm-3"])
    assert isinstance(other[0], IdempotencyConflict)

    before = requests_of(own_leased, "release_batch")
    out = c.release_many([a, stale, b])
    assert requests_of(own_leased, "release_batch") == before + 1
    assert isinstance(out[0], LeaseRecord) and out[0].state == "released"
    assert isinstance(out[1], LeaseLost)
    assert isinstance(out[2], LeaseRecord) and out[2].state == "released"
    assert c.inspect(a.lease_id).state == "released"
    assert c.inspect(b.lease_id).state == "released"


def test_holds_of_one_client_renew_in_one_call_per_period(own_leased, tokens, identity):
    c = Client(own_leased.url, tokens["worker"])
    ttl = 1500
    holds = [c.hold(identity(), ttl_ms=ttl, watch=False) for _ in range(4)]
    leases = [h.start() for h in holds]
    renew0 = requests_of(own_leased, "renew")
    batch0 = requests_of(own_leased, "renew_batch")
    time.sleep(3 * ttl / 1000)
    renews = requests_of(own_leased, "renew") - renew0
    batches = requests_of(own_leased, "renew_batch") - batch0
    print(f"\nrenewal batches: 4 holds of ttl {ttl} ms for {3 * ttl} ms through one Client: "
          f"{batches} renew-batch calls, {renews} single renewals, "
          f"{sum(x.renewals for x in leases)} renewals judged")
    assert renews == 0
    assert 4 <= batches <= 19  # about one per G/3, not one per lease (4 x 9 = 36)
    for x in leases:
        assert not x.lost.is_set() and x.renewals >= 4
        assert c.inspect(x.lease_id).state == "active"
    for h in holds:
        h.__exit__(None, None, None)
    for x in leases:
        assert c.inspect(x.lease_id).state == "released"


def test_one_loss_in_a_batch_ends_only_its_hold(own_leased, tokens, identity):
    c = Client(own_leased.url, tokens["worker"])
    admin = Client(own_leased.url, tokens["admin"])
    ttl = 1500
    holds = [c.hold(identity(), ttl_ms=ttl, watch=False) for _ in range(3)]
    leases = [h.start() for h in holds]
    time.sleep(ttl / 2000)
    admin.force_release(leases[1].lease, reason="py batch loss")
    batch0 = requests_of(own_leased, "renew_batch")
    assert leases[1].lost.wait(ttl / 1000)
    assert leases[1].reason == "lost" and leases[1].code == "lease_lost"
    assert requests_of(own_leased, "renew_batch") > batch0  # told by a batch item
    time.sleep(2 * ttl / 1000)
    for x in (leases[0], leases[2]):
        assert not x.lost.is_set()
        assert c.inspect(x.lease_id).state == "active"
    for h in holds:
        h.__exit__(None, None, None)
