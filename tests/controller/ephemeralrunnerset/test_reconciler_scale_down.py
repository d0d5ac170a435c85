"""Scale-down never deletes a runner with a job, through both controllers, the kubelet and the
Actions emulator, while listener patches, job starts, JobStarted patches and completions arrive
in random orders and race with the reconciles (some steps do not wait for the controllers)."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sandbox.actions.emulator import ActionsEmulator
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions, open_rig


class ControlledRuntime:
    """Runner containers run until the test makes them exit (keyed by pod uid)."""

    def __init__(self) -> None:
        self._exits: dict[str, asyncio.Future[int]] = {}

    def _future(self, uid: str) -> asyncio.Future[int]:
        if uid not in self._exits:
            self._exits[uid] = asyncio.get_running_loop().create_future()
        return self._exits[uid]

    async def run(self, *, pod: JSONDict, container: JSONDict, env: dict[str, str]) -> int:
        if container.get("name") != "runner":
            await asyncio.Event().wait()
        return await self._future(str(pod["metadata"]["uid"]))

    def exit(self, uid: str, code: int) -> None:
        """The runner process ends; the service never gives it another job."""
        future = self._future(uid)
        if not future.done():
            future.set_result(code)


steps = st.lists(
    st.tuples(
        st.sampled_from(["scale", "scale0", "start", "announce", "finish"]),
        st.integers(0, 3),
        st.booleans(),
    ),
    min_size=4,
    max_size=10,
)


class Play:
    def __init__(self, rig: Rig, runtime: ControlledRuntime) -> None:
        self.rig = rig
        self.runtime = runtime
        self.patch_id = 0
        self.busy: dict[str, int] = {}
        self.announced: set[str] = set()
        self.exited: set[str] = set()
        self.jobs = 5000

    async def idle_registered(self) -> list[JSONDict]:
        out = []
        for runner in await self.rig.live_runners():
            status = runner.get("status") or {}
            rid = status.get("runnerId", 0)
            name = runner["metadata"]["name"]
            registered = rid in self.rig.gh.state.runners
            alive = name not in self.busy and name not in self.exited
            if status.get("phase") == "Pending" and registered and alive:
                out.append(runner)
        return sorted(out, key=lambda r: r["metadata"]["name"])

    async def step(self, op: str, value: int) -> None:
        rig = self.rig
        if op in ("scale", "scale0"):
            self.patch_id = 0 if op == "scale0" else self.patch_id + 1
            await rig.scale(value, self.patch_id)
        elif op == "start":
            idle = await self.idle_registered()
            if idle:
                runner = idle[value % len(idle)]
                rid = runner["status"]["runnerId"]
                self.jobs += 1
                rig.gh.state.runners[rid].job_id = self.jobs
                self.busy[runner["metadata"]["name"]] = rid
        elif op == "announce":
            pending = sorted(set(self.busy) - self.announced)
            if pending:
                name = pending[value % len(pending)]
                self.announced.add(name)
                await rig.set_status(name, phase="Running", jobId=f"job-{self.busy[name]}")
        elif op == "finish" and self.busy:
            name = sorted(self.busy)[value % len(self.busy)]
            rid = self.busy.pop(name)
            self.announced.discard(name)
            self.exited.add(name)
            if rid in rig.gh.state.runners:
                rig.gh.state.runners[rid].job_id = None
            pod = await rig.pod(name)
            if pod is not None:
                self.runtime.exit(str(pod["metadata"]["uid"]), 0)

    async def check(self) -> None:
        for name in self.busy:
            runner = await self.rig.runner(name)
            assert runner is not None, f"busy runner {name} was deleted"
            assert not runner["metadata"].get("deletionTimestamp"), f"busy {name} deleting"


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@example(plan=[("start", 0, True), ("scale0", 0, True)])
@example(
    plan=[("start", 1, False), ("announce", 0, False), ("scale0", 0, False), ("scale", 0, True)]
)
@example(plan=[("start", 0, True), ("announce", 0, True), ("start", 0, False), ("scale0", 1, True)])
@given(plan=steps)
async def test_scale_down_never_deletes_a_runner_with_a_job(
    plan: list[tuple[str, int, bool]],
) -> None:
    runtime = ControlledRuntime()
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    async with (
        ActionsEmulator(long_poll_timeout=0.5) as gh,
        open_rig(RigOptions(runtime=runtime), namespace=namespace, actions=gh) as rig,
    ):
        play = Play(rig, runtime)
        await rig.create_runner_set(replicas=2, patch_id=0)
        await rig.registered(2)
        for op, value, wait in plan:
            await play.step(op, value)
            if wait:
                await rig.settle()
            await play.check()
        await rig.settle()
        await play.check()
