"""Fixtures: a leased (two for the cross-instance cases) on the database of
tests/clients/with_database, and its credentials."""
import os
import sys
import uuid
from typing import Callable, Dict, Iterator

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from leased_proc import PROGRAM, TENANT, LeasedProc, credential, on_valkey  # noqa: E402

from leaseclient import Identity  # noqa: E402


@pytest.fixture(scope="session")
def leased() -> Iterator[LeasedProc]:
    p = LeasedProc()
    yield p
    p.stop()


@pytest.fixture(scope="session")
def leased_b() -> Iterator[LeasedProc]:
    """A second instance on the same database."""
    p = LeasedProc()
    yield p
    p.stop()


@pytest.fixture(scope="session")
def tokens() -> Dict[str, str]:
    return {
        "worker": credential("prn_py_worker"),
        "other": credential("prn_py_other"),
        "admin": credential("prn_py_admin", program="*", admin=True,
                            capabilities=("targets:read", "targets:force-release",
                                          "targets:revoke")),
    }


@pytest.fixture
def identity() -> Callable[..., Identity]:
    """A fresh identity per call (its own target)."""
    def make(target: str = "") -> Identity:
        return Identity(TENANT, PROGRAM, "py-target", target or "t-" + uuid.uuid4().hex[:12],
                        "pyworker", "default")
    return make


# The cases left out of the run on Valkey (LEASE_TEST_STORE=valkey;
# docs/backends.md, "Contract tests on both backends"), each with its
# reason: they read PostgreSQL's tables or hold its rows, or use what only
# the PostgreSQL backend has. Left out means not collected: printed, and
# counted nowhere (neither passed nor skipped). On PostgreSQL all run.
_SESSIONS = "sessions need the PostgreSQL backend"
NOT_ON_VALKEY: Dict[str, str] = {
    "test_outcome_unknown_answered_by_the_service":
        "holds a PostgreSQL row lock and terminates leased's database session",
    "test_kill9_during_acquire_then_replay[in-database]":
        "holds the acquire inside PostgreSQL with a row lock",
    "test_commit_documents_and_publications": "publications (the outbox) need PostgreSQL",
    "test_session_calls": _SESSIONS,
    "test_holds_kept_alive_by_one_keepalive_per_period": _SESSIONS,
    "test_a_session_closed_from_outside_loses_every_hold": _SESSIONS,
    "test_a_session_not_kept_alive_expires_and_its_holds_are_lost": _SESSIONS,
    "test_opting_out_renews_per_lease": _SESSIONS + " (it reads lease.locks.session_id)",
    "test_a_session_the_service_expired_is_told_by_the_keepalive": _SESSIONS,
}


_left_out = set()  # the NOT_ON_VALKEY entries that named a case


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str,
                              obj: object) -> Iterator[None]:
    """On Valkey, the cases NOT_ON_VALKEY names are never made into items,
    so pytest does not collect, run or count them."""
    outcome = yield
    if not on_valkey():
        return
    made = outcome.get_result()
    if made is None:
        return
    items = made if isinstance(made, list) else [made]
    kept = []
    for item in items:
        # a case by its name, or one parameter of it by name[param]
        entry = item.name if item.name in NOT_ON_VALKEY else getattr(item, "originalname", None)
        if isinstance(item, pytest.Function) and entry in NOT_ON_VALKEY:
            _left_out.add(entry)
            print(f"not run on valkey: {item.nodeid} ({NOT_ON_VALKEY[entry]})")
        else:
            kept.append(item)
    outcome.force_result(kept if isinstance(made, list) else (kept[0] if kept else None))


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """A whole-suite run names every entry: one that names nothing is stale."""
    if not on_valkey():
        return
    stale = sorted(set(NOT_ON_VALKEY) - _left_out)
    whole = all(os.path.isdir(a) for a in config.args) and not config.getoption("keyword")
    if stale and whole:
        raise pytest.UsageError(f"NOT_ON_VALKEY names no collected case: {stale}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A skipped case is not a passed one: the suite fails when any was skipped."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped and session.exitstatus == 0:
        session.exitstatus = 1
        if reporter:
            reporter.write_line(f"{skipped} case(s) skipped: counted as a failure", red=True)
