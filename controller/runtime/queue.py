"""A work queue of keys with controller-runtime's guarantees.

- One entry per key however many times it is added before a worker takes it (coalescing).
- A key being processed is never handed to a second worker; an add meanwhile is remembered and
  the key comes back once `done` is called.
- `add_after` delays a key; `add_rate_limited` delays it by the key's exponential backoff, which
  `forget` resets.
- `observe_wait`, when set, gets each key's time in the queue, from the add that made it wait to
  the worker taking it (client-go's queue duration).
- Two lanes, as controller-runtime's priority queue: an `urgent` add goes before every key of the
  ordinary lane (the initial list, requeues, most events), and an urgent add of a key already
  waiting moves it there. Within a lane, first in, first out. A worker may take from the urgent
  lane only (`get(urgent_only=True)`): workers kept for urgent keys, which ordinary passes
  never hold up.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from shared.backoff import doubling
from shared.clock import Clock, MonotonicClock

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Per-key exponential backoff: `base * 2**failures`, capped at `maximum` (seconds)."""

    base: float = 0.005
    maximum: float = 300.0

    def delay(self, failures: int) -> float:
        return doubling(self.base, failures, self.maximum)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        backoff: Backoff | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.backoff = backoff or Backoff()
        self._clock = clock or MonotonicClock()
        self._ready: deque[K] = deque()
        self._urgent: deque[K] = deque()
        self._lane: dict[K, bool] = {}
        """The keys in a ready lane, True for the urgent one; a key's entry in the other lane's
        deque (left behind when it moved) is skipped."""
        self._dirty: set[K] = set()
        self._dirty_urgent: set[K] = set()
        """Keys added urgently while a worker holds them: they come back in the urgent lane."""
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._deferred: set[K] = set()
        """Keys whose schedule is a deferred add (`add_deferred`), not a requeue."""
        self._added_at: dict[K, float] = {}
        self._seq = 0
        self._wakeup = asyncio.Event()
        self._urgent_wakeup = asyncio.Event()
        """Set by an add to the urgent lane only: what urgent-only workers wait for."""
        self._shutdown = False
        self.adds = 0
        self.urgent_adds = 0
        """Adds that went to (or moved a key to) the urgent lane."""
        self.retries = 0
        self.requeues = 0
        """Scheduled adds (requeue_after, error backoff) that fell due and were not coalesced."""
        self.observe_wait: Callable[[float], None] | None = None

    def __len__(self) -> int:
        """Keys ready for a worker (the depth metric)."""
        return len(self._lane)

    @property
    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    def in_pass(self, key: K) -> bool:
        """Whether a worker holds the key now (between `get` and `done`)."""
        return key in self._processing

    @property
    def waiting(self) -> int:
        """Keys scheduled for later."""
        return len(self._due)

    @property
    def deferred(self) -> int:
        """Keys whose next pass is a deferred add (`add_deferred`)."""
        return len(self._deferred)

    def add(self, key: K, *, urgent: bool = False) -> bool:
        """Add the key; False when it was already waiting (the add coalesced into that one). An
        `urgent` add of a key waiting in the ordinary lane moves it to the urgent one."""
        if self._shutdown:
            return False
        if key in self._dirty:
            if urgent and self._lane.get(key) is False:
                self._enqueue(key, urgent=True)
                self.urgent_adds += 1
            elif urgent and key in self._processing:
                self._dirty_urgent.add(key)
            return False
        self.adds += 1
        self._dirty.add(key)
        self._added_at[key] = self._clock.now()
        if urgent:
            self.urgent_adds += 1
        if key not in self._processing:
            self._enqueue(key, urgent=urgent)
        elif urgent:
            self._dirty_urgent.add(key)
        self._wakeup.set()
        return True

    def _enqueue(self, key: K, *, urgent: bool) -> None:
        self._lane[key] = urgent
        if urgent:
            self._urgent.append(key)
            self._urgent_wakeup.set()
        else:
            self._ready.append(key)

    def _next_ready(self, *, urgent_only: bool = False) -> K | None:
        """The first key of the urgent lane, else (unless `urgent_only`) of the ordinary one;
        entries a key left behind when it moved lanes are dropped on the way."""
        lanes = [(True, self._urgent)] + ([] if urgent_only else [(False, self._ready)])
        for urgent, lane in lanes:
            while lane:
                key = lane.popleft()
                if self._lane.get(key) is urgent:
                    del self._lane[key]
                    return key
        return None

    def add_after(self, key: K, delay: float) -> None:
        """Add the key once `delay` seconds have passed; an earlier schedule wins."""
        if delay <= 0:
            self.add(key)
            return
        at = self._clock.now() + delay
        if self._due.get(key, float("inf")) <= at:
            return
        self._due[key] = at
        self._deferred.discard(key)
        self._seq += 1
        heapq.heappush(self._delayed, (at, self._seq, key))
        self._wakeup.set()

    def add_deferred(self, key: K, delay: float) -> bool:
        """Add the key once `delay` seconds have passed, unless it is waiting already, or is
        scheduled no later; a pass that takes the key before then cancels the deferral (it
        reads everything the deferred add was for). True when this scheduled a pass."""
        if self._shutdown or key in self._dirty:
            return False
        at = self._clock.now() + delay
        if self._due.get(key, float("inf")) <= at:
            return False
        self._due[key] = at
        self._deferred.add(key)
        self._seq += 1
        heapq.heappush(self._delayed, (at, self._seq, key))
        self._wakeup.set()
        return True

    def add_rate_limited(self, key: K) -> float:
        """Add the key after its backoff, and grow the backoff; returns the delay used."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.retries += 1
        delay = self.backoff.delay(failures)
        self.add_after(key, delay)
        return delay

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def _promote_due(self) -> float | None:
        """Move due keys to ready; when the next one falls due, if any."""
        now = self._clock.now()
        while self._delayed:
            at, _, key = self._delayed[0]
            if self._due.get(key) != at:
                heapq.heappop(self._delayed)
                continue
            if at > now:
                return at
            heapq.heappop(self._delayed)
            del self._due[key]
            if self.add(key) and key not in self._deferred:
                self.requeues += 1
            self._deferred.discard(key)
        return None

    def try_get(self, *, urgent_only: bool = False) -> K | None:
        """A ready key (of the urgent lane only, with `urgent_only`), now marked as processing,
        or None."""
        self._promote_due()
        key = self._next_ready(urgent_only=urgent_only)
        if key is None:
            return None
        self._dirty.discard(key)
        if key in self._deferred:
            # This pass reads what the deferred add was for.
            self._deferred.discard(key)
            del self._due[key]
        self._processing.add(key)
        added_at = self._added_at.pop(key)
        if self.observe_wait is not None:
            self.observe_wait(self._clock.now() - added_at)
        return key

    async def get(self, *, urgent_only: bool = False) -> K | None:
        """Wait for a key (of the urgent lane only, with `urgent_only`); None once the queue is
        shut down. An urgent-only worker never waits for a scheduled key: the ordinary workers
        bring it in when it falls due, and an urgent add wakes it."""
        while not self._shutdown:
            key = self.try_get(urgent_only=urgent_only)
            if key is not None:
                return key
            if urgent_only:
                # The urgent lane is empty now (`try_get` dropped what moved out of it).
                self._urgent_wakeup.clear()
                await self._urgent_wakeup.wait()
                continue
            self._wakeup.clear()
            next_due = self._promote_due()
            if self._lane:
                continue
            if next_due is None:
                await self._wakeup.wait()
            else:
                await self._sleep_or_wakeup(next_due)
        return None

    async def _sleep_or_wakeup(self, deadline: float) -> None:
        sleeper = asyncio.ensure_future(self._clock.sleep_until(deadline))
        waker = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def done(self, key: K) -> None:
        """The worker has finished with the key; an add that came meanwhile makes it ready."""
        self._processing.discard(key)
        urgent = key in self._dirty_urgent
        self._dirty_urgent.discard(key)
        if key in self._dirty:
            self._enqueue(key, urgent=urgent)
            self._wakeup.set()

    def shutdown(self) -> None:
        """Wake every waiting `get` with None; adds are ignored from now on."""
        self._shutdown = True
        self._wakeup.set()
        self._urgent_wakeup.set()
