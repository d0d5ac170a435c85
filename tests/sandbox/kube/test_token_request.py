"""TokenRequest's tokens expire (`kubectl create token --duration`), as the docker-run listener's
does (README, "Run a listener with docker run"); durations outside the API's bounds are refused."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.test_restart import EmulatorClock


async def test_a_requested_token_stops_authenticating_when_it_expires() -> None:
    clock = EmulatorClock()
    async with KubeEmulator(clock=clock) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "bot", "namespace": "ns"},
            }
        )
        async with client.ApiClient(await kube.configuration()) as admin:
            issued = await client.CoreV1Api(admin).create_namespaced_service_account_token(
                "bot", "ns", {"spec": {"expirationSeconds": 600}}
            )
        assert issued.status.expiration_timestamp == clock.now + dt.timedelta(seconds=600)
        async with client.ApiClient(await kube.configuration(token=issued.status.token)) as bot:
            review = await client.AuthenticationV1Api(bot).create_self_subject_review({})
            assert review.status.user_info.username == "system:serviceaccount:ns:bot"
            clock.advance(600)
            with pytest.raises(client.ApiException) as expired:
                await client.AuthenticationV1Api(bot).create_self_subject_review({})
        assert expired.value.status == 401


@pytest.mark.parametrize(
    ("seconds", "why"),
    [(599, "less than 10 minutes"), (2**32 + 1, "larger than 2^32 seconds")],
)
async def test_a_duration_out_of_bounds_is_invalid(seconds: int, why: str) -> None:
    async with KubeEmulator() as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "bot", "namespace": "ns"},
            }
        )
        async with client.ApiClient(await kube.configuration()) as admin:
            with pytest.raises(client.ApiException) as caught:
                await client.CoreV1Api(admin).create_namespaced_service_account_token(
                    "bot", "ns", {"spec": {"expirationSeconds": seconds}}
                )
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
        f"Invalid value: {seconds}: may not specify a duration {why}"
    )
