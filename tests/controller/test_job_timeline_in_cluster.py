"""A job's timeline on the in-cluster path (docs/job-timeline.md): `gha-controller` as the
manifests' Deployment and `gha-listener` as the AutoscalingListener's pod, both real processes
with their ServiceAccounts' tokens (tests/controller/test_in_cluster.py), so the listener's
status patch and the controller's Event go through the Role the controller made for the
listener and the manifests' RBAC."""

from __future__ import annotations

import pytest

from shared.api import timeline as tl
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import EVENT
from shared.typedefs import JSONDict
from tests.controller.test_in_cluster import (
    NAME,
    RUNNERS,
    Cluster,
    cluster,  # noqa: F401 (a fixture)
    install,
    listener_of,
)
from tests.sandbox.kube.test_kubectl import KUBECTL

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


async def test_the_timeline_is_written_when_the_listener_runs_in_the_cluster(
    cluster: Cluster,  # noqa: F811 (the fixture imported above)
) -> None:
    await install(cluster)
    await listener_of(cluster)
    request = cluster.gh.enqueue_job(labels=[NAME], duration=60)
    job_id = str(cluster.gh.state.jobs[request].job_id)

    async def event() -> JSONDict | None:
        items: list[JSONDict] = (await cluster.objects.list(EVENT, RUNNERS))["items"]
        for item in items:
            annotation = (item["metadata"].get("annotations") or {}).get(tl.EVENT_ANNOTATION)
            if item["reason"] != tl.EVENT_REASON or not annotation:
                continue
            if tl.Timeline.from_json(annotation).moments.get(tl.JOB_ID) == job_id:
                return item
        return None

    found = await cluster.until(event, what=f"job {job_id}'s JobTimeline Event")
    timeline = tl.Timeline.from_json(found["metadata"]["annotations"][tl.EVENT_ANNOTATION])
    runner_name = found["involvedObject"]["name"]
    assert timeline.moments[tl.RUNNER] == runner_name
    assert found["message"] == timeline.describe()
    assert [stage.name for stage in timeline.stages()] == [
        tl.STAGE_LISTENER,
        tl.STAGE_CONTROLLER,
        tl.STAGE_SCHEDULING,
        tl.STAGE_CONTAINER_START,
        tl.STAGE_REGISTRATION,
        tl.STAGE_JOB_START,
    ]

    # The listener pod's moments and the controller's, together on the runner's status.
    runner = await cluster.get(EPHEMERAL_RUNNER, RUNNERS, runner_name)
    assert runner is not None
    written = runner["status"][tl.TIMELINE_FIELD]
    for moment in (tl.RECEIVED, tl.DESIRED_WRITTEN, tl.RUNNER_ASSIGNED, tl.JOB_STARTED):
        assert written[moment] == timeline.moments[moment], moment
    for moment in (tl.POD_CREATED, tl.POD_SCHEDULED, tl.CONTAINER_STARTED):
        assert written[moment] == timeline.moments[moment], moment
    assert written[tl.JOB_ID] == job_id

    # What a user reads with kubectl describe.
    described = await cluster.kubectl("-n", RUNNERS, "describe", "ephemeralrunner", runner_name)
    assert tl.EVENT_REASON in described
    cluster.gh.state.finish_job(request)
