"""kubernetes-asyncio's own leader election (read -> create, read -> PUT with the read
resourceVersion) works against the emulator: 404 carries a JSON Status, stale PUTs are 409."""

from __future__ import annotations

import asyncio

from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import TIMEOUT


async def test_candidate_acquires_a_missing_lease(
    kube: KubeEmulator, kube_api: client.ApiClient, ns: str
) -> None:
    leading = asyncio.Event()

    async def started() -> None:
        leading.set()
        await asyncio.Event().wait()

    async def stopped() -> None:
        return None

    lock = LeaseLock("leader", ns, "candidate-a", kube_api)
    config = electionconfig.Config(
        lock,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        onstarted_leading=started,
        onstopped_leading=stopped,
    )
    election = asyncio.create_task(leaderelection.LeaderElection(config).run())
    try:
        await asyncio.wait_for(leading.wait(), TIMEOUT)
    finally:
        election.cancel()
        await asyncio.gather(election, return_exceptions=True)
    lease = kube.store.get(("coordination.k8s.io", "leases"), ns, "leader")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "candidate-a"
    assert kube.requests.count(verb="get", resource="leases", code=404) == 1
    assert kube.requests.count(verb="create", resource="leases", code=201) == 1
