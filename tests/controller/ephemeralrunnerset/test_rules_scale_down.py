"""Scale-down never takes a runner with a job, whatever order listener patches, job starts and
completions arrive in (a model of the cache, the service and the EphemeralRunnerSet's rules).
Runners may also turn `Running` without a job, as ARC's runners do when their pod runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.ephemeralrunnerset.rules import (
    classify,
    plan_scaling,
    scale_down_candidates,
)
from shared.typedefs import JSONDict


@dataclass
class World:
    runners: dict[str, JSONDict] = field(default_factory=dict)
    busy_on_service: set[int] = field(default_factory=set)
    registered: set[int] = field(default_factory=set)
    replicas: int = 0
    patch_id: int = 0
    next_patch: int = 1
    serial: int = 0
    deleted_busy: list[str] = field(default_factory=list)

    def runner(self, index: int) -> JSONDict | None:
        live = sorted(self.runners)
        return self.runners[live[index % len(live)]] if live else None

    def create(self, count: int) -> None:
        for _ in range(count):
            self.serial += 1
            name = f"r{self.serial:04d}"
            self.runners[name] = {
                "metadata": {
                    "name": name,
                    "creationTimestamp": f"2026-12-02T{self.serial // 60 % 24:02d}:"
                    f"{self.serial % 60:02d}:00Z",
                    "annotations": {"actions.github.com/patch-id": str(self.patch_id)},
                },
                "status": {},
            }

    def reconcile(self) -> None:
        children = classify(self.runners.values(), applied_revision=0)
        plan = plan_scaling(
            replicas=self.replicas, patch_id=self.patch_id, children=children, cleanup_marker=0
        )
        if plan is None:
            return
        if plan.cleanup_finished:
            for runner in children.finished:
                del self.runners[runner["metadata"]["name"]]
            return
        self.create(plan.create)
        removed = 0
        for victim in scale_down_candidates(children):
            if removed >= plan.scale_down:
                break
            rid = victim["status"]["runnerId"]
            if rid in self.busy_on_service:
                continue  # the service answers JobStillRunning
            self.registered.discard(rid)
            name = victim["metadata"]["name"]
            status = victim["status"]
            if rid in self.busy_on_service or status.get("jobId") or status.get("jobRequestId"):
                self.deleted_busy.append(name)
            del self.runners[name]
            removed += 1


ops = st.one_of(
    st.tuples(st.just("patch"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("reconcile"), st.just(0), st.just(False)),
    st.tuples(st.just("register"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("assign"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("pod_running"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("job_started"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("complete"), st.integers(0, 20), st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=60))
def test_scale_down_never_deletes_a_runner_with_a_job(
    steps: list[tuple[str, int, bool]],
) -> None:
    world = World()
    for op, value, flag in steps:
        runner = world.runner(value)
        if op == "patch":
            world.replicas = value
            world.patch_id = 0 if flag else world.next_patch
            world.next_patch += 1
        elif op == "reconcile":
            world.reconcile()
        elif runner is None:
            continue
        elif op == "register" and not runner["status"].get("runnerId"):
            rid = int(runner["metadata"]["name"][1:])
            world.registered.add(rid)
            runner["status"].update(runnerId=rid, phase="Pending", ready=flag)
        elif op == "assign":
            rid = runner["status"].get("runnerId", 0)
            if rid in world.registered and rid not in world.busy_on_service:
                world.busy_on_service.add(rid)
        elif op == "pod_running":
            if runner["status"].get("runnerId") and runner["status"].get("phase") == "Pending":
                runner["status"]["phase"] = "Running"
        elif op == "job_started":
            rid = runner["status"].get("runnerId", 0)
            if rid in world.busy_on_service and runner["status"].get("phase") in (
                "Pending",
                "Running",
            ):
                job = {"jobId": f"job-{rid}"} if flag else {"jobRequestId": rid}
                runner["status"].update(phase="Running", **job)
        elif op == "complete":
            rid = runner["status"].get("runnerId", 0)
            if rid in world.busy_on_service:
                world.busy_on_service.discard(rid)
                world.registered.discard(rid)
                runner["status"]["phase"] = "Succeeded"
        children = classify(world.runners.values(), applied_revision=0)
        for candidate in scale_down_candidates(children):
            assert not candidate["status"].get("jobId")
            assert not candidate["status"].get("jobRequestId")
    assert world.deleted_busy == []
