"""docs/clients.md's Python reference says what is: every attribute and
method its tables name exists on the class it is listed under, with the
type given wherever the value is set, and the defaults it states are the
client's."""
import os
import re
import socket
import typing

from leaseclient import (MAX_ANSWER_BYTES, Client, HeldLease, Hold, Identity, LeaseRecord,
                         SessionRecord)
from leaseclient import schedule

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs",
                   "clients.md")


def _python_section() -> str:
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    return text[text.index("\n## Python\n"):text.index("\n## Go\n")]


def _tables(section: str) -> "dict[str, list[tuple[str, list[list[str]]]]]":
    """{heading name: [(first header cell, rows of cells)]} under each "#### `Name`"."""
    out: "dict[str, list[tuple[str, list[list[str]]]]]" = {}
    for part in re.split(r"\n#### ", section)[1:]:
        heading = part.split("\n", 1)[0].strip()
        tables = []
        for block in re.findall(r"((?:^\|.*\|\n)+)", part.split("\n### ")[0], re.M):
            lines = [ln for ln in block.strip().split("\n")]
            cells = [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]
            tables.append((cells[0][0], cells[2:]))
        out[heading] = tables
    return out


def _name(cell: str) -> str:
    m = re.match(r"`([A-Za-z_][A-Za-z_0-9]*)", cell)
    assert m, f"not a name: {cell}"
    return m.group(1)


def _type_names(cell: str) -> "set[str]":
    kinds = cell.strip("`").replace("\\|", "|").split("|")
    return {k.strip().split(".")[-1] for k in kinds} - {"None"}


def _instances() -> "dict[str, object]":
    client = Client("http://127.0.0.1:9", "lsk_doc")
    ident = Identity("tenant-main", "program-a", "ns", "t1", "actor", "default")
    lease = LeaseRecord(identity=ident, lease_id="lease_doc", fencing_token=3, ttl_ms=3000,
                        acquired_at="2026-01-01T00:00:00.000Z",
                        renewed_at="2026-01-01T00:00:00.000Z",
                        expires_at="2026-01-01T00:00:03.000Z",
                        ended_at="2026-01-01T00:00:03.000Z", maximum_lifetime_ms=60000,
                        service_instance_id="h-1", execution_id="exec_x", job_id="job_x",
                        trace_id="0" * 32, metadata={}, code="lease_acquired",
                        current_state="active", request_id="req_x", correlation_id="corr_x")
    held = HeldLease(client, lease, schedule.plan(0.0, 3000), service_instance_id="h-1",
                     ttl_ms=3000, watch=False, watch_wait_ms=30000, margin_ms=0)
    session = SessionRecord(session_id="session_doc", state="closed", ttl_ms=3000,
                            renewed_at="2026-01-01T00:00:00.000Z",
                            expires_at="2026-01-01T00:00:03.000Z",
                            created_at="2026-01-01T00:00:00.000Z", tenant_id="tenant-main",
                            owner_principal_id="prn_x", owner_credential_id="key_x",
                            service_instance_id="h-1", code="lease_released", leases_ended=2,
                            more=False, request_id="req_x", correlation_id="corr_x")
    return {"`Client`": client, "`HeldLease`": held, "`LeaseRecord`": lease,
            "`SessionRecord`": session}


def _check(obj: object, kind: str, rows: "list[list[str]]", where: str) -> int:
    checked = 0
    for row in rows:
        name = _name(row[0])
        assert hasattr(obj, name), f"{where}: docs/clients.md names {name}, which does not exist"
        value = getattr(obj, name)
        if kind == "method":
            assert callable(value), f"{where}.{name} is documented as a method"
        elif value is not None:
            names = _type_names(row[1])
            assert type(value).__name__ in names, \
                f"{where}.{name} is {type(value).__name__}, documented as {row[1]}"
        checked += 1
    return checked


def test_every_documented_attribute_and_method_exists_with_its_type():
    tables = _tables(_python_section())
    objs = _instances()
    checked = 0
    for heading, obj in objs.items():
        assert heading in tables, f"no #### {heading} reference in docs/clients.md"
        for kind, rows in tables[heading]:
            if kind in ("attribute", "method"):
                checked += _check(obj, kind, rows, heading)
    # a lost hold's reason, code and detail are strings, as documented
    held = objs["`HeldLease`"]
    assert isinstance(held, HeldLease)
    held._signal("lost", "lease_lost", "documentation check")
    for kind, rows in tables["`HeldLease`"]:
        if kind == "attribute":
            _check(held, kind, [r for r in rows if _name(r[0]) in ("reason", "code", "detail")],
                   "`HeldLease`")
    assert isinstance(held.renewals, int) and not isinstance(held.renewals, bool)
    print(f"\n{checked} documented names checked")
    assert checked >= 50


def test_a_hold_gives_a_held_lease():
    assert typing.get_type_hints(Hold.__enter__)["return"] is HeldLease


def test_documented_defaults_are_the_clients():
    section = _python_section()
    row = next(ln for ln in section.split("\n") if ln.startswith("| `MAX_ANSWER_BYTES`"))
    assert int(re.search(r"\(([\d ]+) bytes", row).group(1).replace(" ", "")) == MAX_ANSWER_BYTES
    assert MAX_ANSWER_BYTES == 8 * 1024 * 1024
    assert "`<hostname>-<pid>`" in section
    assert Client("http://127.0.0.1:9").service_instance_id == \
        f"{socket.gethostname()}-{os.getpid()}"[:128]
