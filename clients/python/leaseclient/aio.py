"""The asyncio form of a hold: ``async with client.hold_async(...) as lease:``.

The blocking parts (acquire, release) run in threads; renewal and the watch
run in the hold's own background threads as in the blocking form. When the
lease is lost, the task that entered the block is cancelled, and leaving the
block turns that cancellation into :class:`LeaseLost` (as asyncio.timeout
turns its cancellation into TimeoutError), so a caller can tell it from a
cancellation of its own.
"""
import asyncio
import functools
from types import TracebackType
from typing import Any, Optional, Type

from .calls import Calls
from .errors import LeaseLost
from .hold import Hold, HeldLease
from .types import Identity


class AsyncHold:
    def __init__(self, client: Calls, identity: Identity, **kw: Any) -> None:
        self._hold = Hold(client, identity, **kw)
        self._task: Optional["asyncio.Task[Any]"] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._cancelled_by_loss = False
        self._hold_released = False
        self.held: Optional[HeldLease] = None

    def _on_lost(self, held: HeldLease) -> None:
        # runs on a hold thread: hand the cancellation to the loop
        loop, task = self._loop, self._task
        if loop is None or task is None:
            return
        try:
            loop.call_soon_threadsafe(self._cancel_task)
        except RuntimeError:  # the loop is closed
            pass

    def _cancel_task(self) -> None:
        if self._task is not None and not self._task.done() and self.held is not None \
                and not self._hold_released:
            self._cancelled_by_loss = True
            self._task.cancel()

    async def __aenter__(self) -> HeldLease:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        held = await self._loop.run_in_executor(None, self._hold.start)
        self.held = held
        held.add_lost_callback(self._on_lost)
        return held

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        held = self.held
        if held is None:
            return
        self._hold_released = True
        assert self._loop is not None
        release = self._loop.run_in_executor(None, functools.partial(held.release))
        try:
            await asyncio.shield(release)
        except asyncio.CancelledError as e:
            # our cancellation arrived after the body had finished
            if not self._cancelled_by_loss:
                raise
            await release
            exc_type, exc = asyncio.CancelledError, e
        if self._cancelled_by_loss and exc_type is asyncio.CancelledError:
            uncancel = getattr(self._task, "uncancel", None)  # 3.11+: cancellation consumed
            if uncancel is not None:
                uncancel()
            raise LeaseLost(f"lease {held.lease_id} is {held.reason} ({held.code}); "
                            "the block was cancelled") from exc
