"""A control-plane outage, then a quiet cluster: the controller's informers start their backoff
over once the server answers again, so a job queued after the outage gets its runner within a
retry_base or two, not after the retry_max an outage of any length grew the backoff to.

On a real cluster (issue 39): the API server stopped for over a minute, came back, and sent no
bookmark on the quiet watches for 70 s; each watch then ended by the inactivity watchdog and
waited the full 30 s retry_max before re-listing, while the listener's ask waited with it.

The informers' backoffs run on a fake clock (the test moves it), their inactivity watchdog in
real time (half a second here): a failure is counted by the informer's `failures`, and "within a
few seconds" is how far the test moved the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from controller.runtime import FakeClock, Informer, WatchSettings
from shared.api.kinds import EPHEMERAL_RUNNER_SET
from tests.controller.conftest import Rig, RigOptions

RETRY_BASE = 0.5
RETRY_MAX = 30.0
QUIET = WatchSettings(
    inactivity_timeout=0.5, request_timeout=5.0, retry_base=RETRY_BASE, retry_max=RETRY_MAX
)
OUTAGE_ROUNDS = 8
"""Failed attempts in a row during the outage: enough for the backoff to reach retry_max."""


@pytest.fixture
def rig_options() -> RigOptions:
    # Bookmarks every 0.1 s keep a healthy watch from looking dead to the 0.5 s watchdog: only
    # the quiet the fault makes ends one.
    return RigOptions(watch=QUIET, clock=FakeClock(), bookmark_interval=0.1)


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        # The informer offers no event to wait on: poll it, with a deadline.
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def failed(informer: Informer, count: int) -> None:
    """Until the informer counted `count` failures: it is then asleep on its backoff."""
    await until(lambda: informer.failures >= count)


def restart(rig: Rig) -> Callable[[], None]:
    """The API server restarts and its watch caches take their time: every watch is refused
    with 429 until `initialized` (older versions are 410 then; the informers' last bookmark is
    the current version, so they resume)."""
    rig.kube.faults.restart()
    return lambda: rig.kube.faults.initialized()


def unreachable(rig: Rig) -> Callable[[], None]:
    """The API server cannot be reached: every watch fails, then it answers again with its
    history intact, so the informers resume their watches without a list."""
    rule = rig.kube.faults.inject(verb="watch", status=503)
    rig.kube.faults.drop_watches()
    return lambda: rig.kube.faults.remove(rule)


@pytest.mark.parametrize("outage", [restart, unreachable])
async def test_after_an_outage_and_a_quiet_watch_the_runner_is_created_within_a_retry_base(
    rig: Rig, rig_options: RigOptions, outage: Callable[[Rig], Callable[[], None]]
) -> None:
    clock = rig_options.clock
    assert isinstance(clock, FakeClock)
    informer = rig.manager.informer(EPHEMERAL_RUNNER_SET)
    await rig.create_runner_set()
    await rig.settle()

    failures = informer.failures
    end = outage(rig)
    for _ in range(OUTAGE_ROUNDS):
        # The clock moves first: a watch the 0.5 s watchdog ended before the outage (bookmarks
        # late on a loaded machine) left its informer asleep on the fake clock, and no failure
        # would come. It moved after each failure before, and one CI run waited out its deadline
        # so.
        await clock.advance(RETRY_MAX)
        await failed(informer, failures + 1)
        failures = informer.failures
    # The server is back, and sends no bookmark for longer than the watchdog waits.
    rig.kube.faults.quiet(5.0)
    failures = informer.failures
    end()
    await clock.advance(RETRY_MAX)
    # The resumed (or re-listed) watch is established, then ends quiet: one more failure.
    await failed(informer, failures + 1)

    await rig.scale(1, 1)
    await clock.advance(2 * RETRY_BASE)

    async def created() -> bool:
        return len(await rig.live_runners()) == 1

    # Within the rig's deadline of real time; without the fix the set's informer sleeps out the
    # retry maximum on the fake clock, which the test never moves that far.
    await rig.until(created, what="the runner, with the clock moved two retry bases")
