"""The relay consumer helper: the C client's rules (src/client/consumer.c)."""
import pytest

from leaseclient import Consumer, InvalidDelivery, Verdict, parse_delivery

HEADERS = {
    "outbox_id": 7, "lease_id": "lease_abc", "fencing_token": 3, "tenant_id": "Tenant-Main",
    "program_id": "program-a", "target_namespace": "ns", "target_id": "T-1",
    "actor_name": "a", "workflow_name": "w", "operation_class": "default",
    "execution_id": "e", "trace_id": "tr", "topic": "t", "created_at": "x",
}


def delivery(message_id, **over):
    h = dict(HEADERS)
    h.update(over)
    return parse_delivery(message_id, h)


def test_parse_normalises_and_accepts_bytes_and_ints():
    d = parse_delivery(b"7", dict(HEADERS, tenant_id=b"Tenant-Main", fencing_token="3"),
                       b'{"n": 1}')
    assert d.payload == {"n": 1}
    assert d.outbox_id == 7 and d.fencing_token == 3 and d.lease_id == "lease_abc"
    assert d.identity.tenant_id == "tenant-main" and d.identity.target_id == "T-1"
    assert d.trace_id == "tr"


@pytest.mark.parametrize("mid,over,field", [
    ("0", {}, "message_id"), ("-1", {}, "message_id"), ("x", {}, "message_id"),
    (None, {}, "message_id"), ("12345678901234567890", {}, "message_id"),
    ("1", {"fencing_token": None}, "fencing_token"), ("1", {"fencing_token": True}, "fencing_token"),
    ("1", {"lease_id": "bad id"}, "lease_id"), ("1", {"trace_id": "a b"}, "trace_id"),
    ("1", {"operation_class": None}, "operation_class"),
    ("1", {"operation_class": "bogus"}, "operation_class"),
    ("1", {"target_id": "a..b"}, "target_id"), ("1", {"tenant_id": "é"}, "tenant_id"),
])
def test_parse_refuses(mid, over, field):
    with pytest.raises(InvalidDelivery) as e:
        delivery(mid, **over)
    assert e.value.field == field


def test_duplicates_and_stale_tokens_are_dropped():
    c = Consumer()
    first = delivery("10", fencing_token=5)
    assert c.classify(first) is Verdict.NEW
    assert c.classify(first) is Verdict.NEW  # classify changes nothing
    c.record(first)
    assert c.classify(first) is Verdict.DUPLICATE
    assert c.classify(delivery("11", fencing_token=5)) is Verdict.NEW  # same lease: applied
    assert c.classify(delivery("12", fencing_token=4)) is Verdict.STALE
    # the same identity written differently (case folding) is the same identity
    assert c.classify(delivery("13", fencing_token=4, tenant_id="TENANT-MAIN")) is Verdict.STALE
    # another identity has its own token
    assert c.classify(delivery("14", fencing_token=1, target_id="T-2")) is Verdict.NEW
    # duplicate is checked before stale
    c.record(delivery("15", fencing_token=9))
    assert c.classify(first) is Verdict.DUPLICATE
    assert c.classify(delivery("16", fencing_token=5)) is Verdict.STALE
    c.record(delivery("17", fencing_token=2))  # never lowers the mark
    assert c.classify(delivery("18", fencing_token=8)) is Verdict.STALE


def test_window_forgets_the_oldest_ids():
    c = Consumer(window=3)
    for i in range(1, 5):
        c.record(delivery(str(i)))
    assert c.classify(delivery("1")) is Verdict.NEW  # forgotten
    assert all(c.classify(delivery(str(i))) is Verdict.DUPLICATE for i in (2, 3, 4))


def test_a_payload_that_is_not_json_is_refused():
    with pytest.raises(InvalidDelivery) as e:
        parse_delivery("1", HEADERS, b"\xff not json")
    assert e.value.field == "payload"
