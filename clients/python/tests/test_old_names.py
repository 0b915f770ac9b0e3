"""The names issue 36 replaced still work, as deprecated aliases of the new
ones (docs/clients.md, "Names"): code written against them keeps running.
Each assertion fails once its alias is removed."""
import dataclasses

import leaseclient
from leaseclient import Client, HeldLease, Hold, Identity, LeaseRecord


def test_lease_is_the_lease_record_under_its_old_name():
    from leaseclient import Lease
    from leaseclient.types import Lease as TypesLease
    assert Lease is LeaseRecord and TypesLease is LeaseRecord
    assert "Lease" in leaseclient.__all__ and "LeaseRecord" in leaseclient.__all__
    ident = Identity("tenant-main", "program-a", "ns", "t1", "actor", "default")
    old = Lease(identity=ident, lease_id="lease_old", fencing_token=4, ttl_ms=3000)
    assert isinstance(old, LeaseRecord) and dataclasses.is_dataclass(old)
    parsed = Lease.from_json({"lock_identity": ident.to_json(), "lease_id": "lease_old",
                              "fencing_token": 4, "state": "active", "ttl_ms": 3000})
    assert isinstance(parsed, Lease) and parsed.fencing_token == 4


def test_the_held_lease_names_and_the_batch_calls_are_unchanged():
    import typing
    assert typing.get_type_hints(Hold.__enter__)["return"] is HeldLease
    assert leaseclient.HeldLease is HeldLease and leaseclient.Hold is Hold
    client = Client("http://127.0.0.1:9", "lsk_old")
    hold = client.hold(Identity("tenant-main", "program-a", "ns", "t1", "actor", "default"))
    assert isinstance(hold, Hold)
    for name in ("renew_many", "release_many"):
        assert callable(getattr(client, name))


def test_the_client_module_still_offers_what_it_did():
    # leaseclient.client was the module of every call; it still is their face
    from leaseclient import client as module
    assert module.Client is Client
    for name in ("new_id", "new_trace_id", "BATCH_MAX", "DEFAULT_DEADLINE_MS",
                 "DEFAULT_WATCH_WAIT_MS", "ACQUIRE_DEADLINE_CAP_MS", "LeaseLike",
                 "default_service_instance_id"):
        assert hasattr(module, name), name
