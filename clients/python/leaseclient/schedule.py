"""The renewal schedule of docs/executor.md ("The renewal schedule"), as pure
arithmetic on time.monotonic() seconds: no clock is read here.

A confirmed acquire or renewal whose request was first sent at S and which
grants G ms gives: local expiry E = S + G; margin G/10 clamped to
[100 ms, 5 s], never above G/4; cancel point C = E - margin; renewal
R = S + G/3 +/- 10 %, never after S + (C - S)/2; and a renewal sent at T must
be answered by A = T + (C - T)/2.

For an acquire the anchor is S' = min(S + waited_ms, answer arrival): the
service reports how long it held the request before the attempt that granted
it began, so a grant late in a long wait starts its window then, measured on
the client's own clock (never later than the answer's arrival, never earlier
than the first send).
"""
import random
from dataclasses import dataclass
from typing import Callable, Optional

MARGIN_MIN_MS = 100
MARGIN_MAX_MS = 5000
RENEW_PERMILLE = 333
JITTER_PERMILLE = 100
RETRY_FIRST_MS = 100
RETRY_MAX_MS = 1600
RETRY_FLOOR_MS = 10


@dataclass(frozen=True)
class Window:
    sent: float  # S (or S' for an acquire)
    grant_ms: int  # G
    expiry: float  # E
    cancel: float  # C
    renew: float  # R


def anchor(first_sent: float, waited_ms: int, answered: float) -> float:
    """S' = min(S + waited_ms, arrival); S when the service reported no wait."""
    if waited_ms <= 0:
        return first_sent
    return min(first_sent + waited_ms / 1000.0, answered)


def margin_ms(grant_ms: int, configured_ms: int = 0) -> int:
    margin = configured_ms
    if margin <= 0:
        margin = min(max(grant_ms // 10, MARGIN_MIN_MS), MARGIN_MAX_MS)
    # a margin eating most of the grant would leave no time to renew
    return min(margin, grant_ms // 4)


def plan(sent: float, grant_ms: int, *, margin_config_ms: int = 0,
         draw: Optional[Callable[[int, int], int]] = None) -> Window:
    """The window of a grant of grant_ms whose request was first sent at sent."""
    grant_ms = max(grant_ms, 0)
    draw = draw or random.randint
    expiry = sent + grant_ms / 1000.0
    cancel = expiry - margin_ms(grant_ms, margin_config_ms) / 1000.0
    interval = grant_ms * RENEW_PERMILLE // 1000
    spread = interval * JITTER_PERMILLE // 1000
    jitter = draw(-spread, spread) if spread > 0 else 0
    renew = sent + (interval + jitter) / 1000.0
    # leave half the window for the attempt, its retries and a late answer's
    # inspection before the cancel point
    latest = sent + (cancel - sent) / 2
    renew = max(min(renew, latest), sent)
    return Window(sent, grant_ms, expiry, cancel, renew)


def answer_deadline(sent: float, cancel: float) -> float:
    """A renewal sent at ``sent`` grants nothing by itself if answered after this."""
    if cancel <= sent:
        return sent
    return sent + (cancel - sent) / 2


def retry_at(now: float, cancel: float, failures: int) -> float:
    """When to retry after ``failures`` temporary failures in a row: 100 ms
    doubling to 1.6 s, never more than a quarter of the time left before C."""
    shift = max(failures - 1, 0)
    backoff = min(RETRY_FIRST_MS << min(shift, 4), RETRY_MAX_MS) / 1000.0
    quarter = max((cancel - now) / 4, RETRY_FLOOR_MS / 1000.0)
    return now + min(backoff, quarter)
