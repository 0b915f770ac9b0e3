"""The renewal schedule's arithmetic (docs/executor.md), as
tests/unit/test_held_schedule.c pins the C one."""
import pytest

from leaseclient import schedule


def test_windows_of_the_documented_table():
    mid = lambda a, b: (a + b) // 2  # noqa: E731 - no jitter
    w = schedule.plan(100.0, 30000, draw=mid)
    assert (w.expiry, w.cancel) == (130.0, 127.0)
    assert w.renew == pytest.approx(100.0 + 9.99)
    w = schedule.plan(0.0, 3000, draw=mid)
    assert (w.expiry, w.cancel) == (3.0, 2.7)
    for draw in (lambda a, b: a, lambda a, b: b):
        w = schedule.plan(0.0, 30000, draw=draw)
        assert 8.99 <= w.renew <= 10.99


def test_margin_bounds():
    assert schedule.margin_ms(30000) == 3000
    assert schedule.margin_ms(120000) == 5000
    assert schedule.margin_ms(1500) == 150
    assert schedule.margin_ms(300) == 75  # never above G/4


def test_renewal_never_after_half_the_window():
    w = schedule.plan(0.0, 400, draw=lambda a, b: b)
    assert w.renew <= (w.cancel - w.sent) / 2


def test_answer_deadline_and_retries():
    assert schedule.answer_deadline(10.0, 20.0) == 15.0
    assert schedule.answer_deadline(10.0, 5.0) == 10.0
    assert schedule.retry_at(0.0, 100.0, 1) == pytest.approx(0.1)
    assert schedule.retry_at(0.0, 100.0, 9) == pytest.approx(1.6)
    assert schedule.retry_at(0.0, 0.4, 3) == pytest.approx(0.1)  # a quarter of what is left


def test_anchor_of_a_waited_grant():
    # no wait reported: the first send
    assert schedule.anchor(10.0, 0, 12.5) == 10.0
    # granted 2 s into its wait: the window starts then
    assert schedule.anchor(10.0, 2000, 12.5) == 12.0
    # never later than the answer's arrival
    assert schedule.anchor(10.0, 5000, 12.5) == 12.5
