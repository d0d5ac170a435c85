"""The AutoscalingListener reconciler against the Kubernetes emulator, one ARC scenario per test
(docs/autoscaling.md#arcs-test-scenarios). No kubelet runs: the tests write the listener pod's
status as a kubelet would, so they decide when the listener exits."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sandbox.tls import generate
from shared.api.kinds import AUTOSCALING_LISTENER
from shared.kube.errors import NotFound
from shared.kube.objects import (
    CONFIG_MAP,
    EVENT,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    Kind,
)
from shared.typedefs import JSONDict
from tests.controller.autoscaling import create_ars
from tests.controller.conftest import FAST_LISTENER, LISTENER_IMAGE, Rig, RigOptions

NAME = "arc-listener"
HOLD = "test.example/hold"
"""A finalizer the test holds a pod with, so it stays terminating."""
FINALIZER = "autoscalinglistener.actions.github.com/finalizer"


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("autoscalinglistener",), kubelet=False)


def listener_body(rig: Rig, **spec: Any) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": {
            "name": NAME,
            "namespace": rig.system_namespace,
            "labels": {"app": "listener"},
        },
        "spec": {
            "githubConfigUrl": rig.config_url,
            "githubConfigSecret": "github-secret",
            "runnerScaleSetId": rig.scale_set_id,
            "autoscalingRunnerSetNamespace": rig.namespace,
            "autoscalingRunnerSetName": "arc",
            "ephemeralRunnerSetName": "arc",
            "maxRunners": 5,
            "minRunners": 0,
            "image": LISTENER_IMAGE,
            **spec,
        },
    }


async def create_listener(rig: Rig, **spec: Any) -> JSONDict:
    await create_ars(rig)
    return await rig.objects.create(
        AUTOSCALING_LISTENER, rig.system_namespace, listener_body(rig, **spec)
    )


async def get(rig: Rig, kind: Kind, name: str, namespace: str | None = None) -> JSONDict | None:
    try:
        return await rig.objects.get(kind, namespace or rig.system_namespace, name)
    except NotFound:
        return None


async def pod(rig: Rig) -> JSONDict:
    async def probe() -> JSONDict | None:
        return await get(rig, POD, NAME)

    found: JSONDict = await rig.until(probe, what="the listener pod")
    return found


async def new_pod(rig: Rig, old_uid: str) -> JSONDict:
    async def probe() -> JSONDict | None:
        found = await get(rig, POD, NAME)
        return found if found and found["metadata"]["uid"] != old_uid else None

    made: JSONDict = await rig.until(probe, what="a new listener pod")
    return made


def config_of(secret: JSONDict) -> JSONDict:
    loaded: JSONDict = json.loads(base64.b64decode(secret["data"]["config.json"]))
    return loaded


async def terminate(rig: Rig, exit_code: int, **status: Any) -> None:
    await rig.objects.patch(
        POD,
        rig.system_namespace,
        NAME,
        {
            "status": {
                "phase": "Failed" if exit_code else "Succeeded",
                "containerStatuses": [
                    {
                        "name": "listener",
                        "ready": False,
                        "restartCount": 0,
                        "image": LISTENER_IMAGE,
                        "imageID": "",
                        "state": {"terminated": {"exitCode": exit_code}},
                    }
                ],
                **status,
            }
        },
        status=True,
    )


async def test_create_makes_every_child_with_the_listeners_least_privilege(rig: Rig) -> None:
    await create_listener(rig)
    made = await pod(rig)
    listener = await get(rig, AUTOSCALING_LISTENER, NAME)
    assert listener is not None
    assert listener["metadata"]["finalizers"] == [FINALIZER]
    assert await get(rig, SERVICE_ACCOUNT, NAME) is not None
    role = await get(rig, ROLE, NAME, rig.namespace)
    assert role is not None
    assert role["rules"] == [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunnersets"],
            "resourceNames": ["arc"],
            "verbs": ["patch"],
        },
        {"apiGroups": ["actions.github.com"], "resources": ["ephemeralrunners"], "verbs": ["get"]},
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunners/status"],
            "verbs": ["patch"],
        },
    ]
    binding = await get(rig, ROLE_BINDING, NAME, rig.namespace)
    assert binding is not None
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": NAME,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "namespace": rig.system_namespace, "name": NAME}
    ]
    secret = await get(rig, SECRET, f"{NAME}-config")
    assert secret is not None
    config = config_of(secret)
    assert list(config)[:3] == ["configure_url", "vault_type", "vault_lookup_key"]
    assert config["runner_scale_set_id"] == rig.scale_set_id
    assert config["ephemeral_runner_set_name"] == "arc"
    assert config["github_token"]
    assert not config["github_app_private_key"]
    spec = made["spec"]
    assert spec["serviceAccountName"] == NAME
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] == 60
    [container] = spec["containers"]
    assert container["image"] == LISTENER_IMAGE
    assert container["command"] == ["gha-listener"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert made["metadata"]["ownerReferences"][0]["name"] == NAME


async def test_delete_removes_every_child_then_the_listener(rig: Rig) -> None:
    await create_listener(rig, proxy={"http": {"url": "http://proxy:3128"}})
    await pod(rig)
    await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, NAME)

    async def gone() -> bool:
        return await get(rig, AUTOSCALING_LISTENER, NAME) is None

    await rig.until(gone, what="listener gone")
    for kind, name, namespace in [
        (POD, NAME, None),
        (SECRET, f"{NAME}-config", None),
        (SECRET, f"{NAME}-proxy", None),
        (SERVICE_ACCOUNT, NAME, None),
        (ROLE, NAME, rig.namespace),
        (ROLE_BINDING, NAME, rig.namespace),
    ]:
        assert await get(rig, kind, name, namespace) is None, (kind.kind, name)


async def test_the_role_goes_only_after_the_listener_pods(rig: Rig) -> None:
    """A listener stopping on SIGTERM still needs its Role (a standby releases its Lease with
    it): while a pod is terminating, held here by a test finalizer, the Role and its binding
    stay; they go once it is gone."""
    await create_listener(rig)
    await pod(rig)
    await rig.objects.patch(POD, rig.system_namespace, NAME, {"metadata": {"finalizers": [HOLD]}})
    await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, NAME)

    async def terminating() -> bool:
        found = await get(rig, POD, NAME)
        return found is not None and bool(found["metadata"].get("deletionTimestamp"))

    await rig.until(terminating, what="listener pod terminating")
    await rig.settle()
    assert await get(rig, ROLE, NAME, rig.namespace) is not None
    assert await get(rig, ROLE_BINDING, NAME, rig.namespace) is not None

    await rig.objects.patch(POD, rig.system_namespace, NAME, {"metadata": {"finalizers": None}})

    async def gone() -> bool:
        return await get(rig, AUTOSCALING_LISTENER, NAME) is None

    await rig.until(gone, what="listener gone")
    assert await get(rig, ROLE, NAME, rig.namespace) is None
    assert await get(rig, ROLE_BINDING, NAME, rig.namespace) is None


async def test_runner_set_rename_updates_the_role(rig: Rig) -> None:
    await create_listener(rig)
    await pod(rig)
    await rig.objects.patch(
        AUTOSCALING_LISTENER,
        rig.system_namespace,
        NAME,
        {"spec": {"ephemeralRunnerSetName": "renamed"}},
    )

    async def updated() -> bool:
        role = await get(rig, ROLE, NAME, rig.namespace)
        return role is not None and role["rules"][0]["resourceNames"] == ["renamed"]

    await rig.until(updated, what="the Role names the new set")


async def test_metadata_reaches_every_child(rig: Rig) -> None:
    await create_listener(
        rig,
        serviceAccountMetadata={"labels": {"sa": "1"}, "annotations": {"sa-note": "x"}},
        roleMetadata={"labels": {"role": "1"}},
        roleBindingMetadata={"annotations": {"rb-note": "y"}},
        configSecretMetadata={"labels": {"cfg": "1"}},
    )
    made = await pod(rig)
    assert made["metadata"]["labels"]["app"] == "listener"
    sa = await get(rig, SERVICE_ACCOUNT, NAME)
    role = await get(rig, ROLE, NAME, rig.namespace)
    binding = await get(rig, ROLE_BINDING, NAME, rig.namespace)
    secret = await get(rig, SECRET, f"{NAME}-config")
    assert sa
    assert sa["metadata"]["labels"]["sa"] == "1"
    assert sa["metadata"]["annotations"]["sa-note"] == "x"
    assert role
    assert role["metadata"]["labels"]["role"] == "1"
    assert binding
    assert binding["metadata"]["annotations"]["rb-note"] == "y"
    assert secret
    assert secret["metadata"]["labels"]["cfg"] == "1"


@pytest.mark.parametrize(
    ("exit_code", "extra"),
    [
        pytest.param(0, {}, id="exit-0"),
        pytest.param(1, {}, id="exit-1"),
        pytest.param(0, {"reason": "Evicted", "phase": "Failed"}, id="evicted"),
    ],
)
async def test_a_stopped_listener_pod_is_made_again(
    rig: Rig, exit_code: int, extra: JSONDict
) -> None:
    await create_listener(rig)
    first = await pod(rig)
    secret = await get(rig, SECRET, f"{NAME}-config")
    assert secret is not None
    await terminate(rig, exit_code, **extra)
    await new_pod(rig, first["metadata"]["uid"])
    again = await get(rig, SECRET, f"{NAME}-config")
    assert again is not None
    assert again["metadata"]["uid"] == secret["metadata"]["uid"]


async def test_a_deleted_pod_is_made_again(rig: Rig) -> None:
    await create_listener(rig)
    first = await pod(rig)
    await rig.objects.delete(POD, rig.system_namespace, NAME)
    await new_pod(rig, first["metadata"]["uid"])


async def test_a_crash_looping_listener_backs_off_and_says_so(rig: Rig) -> None:
    """ARC re-creates a crashing listener at once, for ever; here each re-creation waits twice
    as long as the one before (0.05, 0.1, 0.2 s in the rig) and the third says so in an Event."""
    await create_listener(rig)
    current = await pod(rig)
    for _ in range(3):
        await terminate(rig, 1)
        current = await new_pod(rig, current["metadata"]["uid"])
    items = (await rig.objects.list(EVENT, rig.system_namespace))["items"]
    reasons = [e["reason"] for e in items if e["involvedObject"]["name"] == NAME]
    assert reasons == ["ListenerCrashLooping"]
    assert rig.manager.metrics.metrics  # the gauge below is served from the same registry
    families = {f.name: f for f in text_string_to_metric_families(rig.metrics())}
    [sample] = families["gha_controller_running_listeners"].samples
    assert sample.labels["name"] == NAME
    assert sample.labels["namespace"] == rig.system_namespace


async def test_template_customises_the_pod(rig: Rig) -> None:
    template = {
        "metadata": {
            "labels": {"test-label-key": "v"},
            "annotations": {"test-annotation-key": "v"},
        },
        "spec": {
            "securityContext": {"runAsUser": 1001},
            "containers": [
                {
                    "name": "listener",
                    "imagePullPolicy": "Always",
                    "securityContext": {"runAsUser": 1001},
                },
                {"name": "sidecar", "image": "busybox", "imagePullPolicy": "IfNotPresent"},
            ],
        },
    }
    await create_listener(rig, template=template)
    made = await pod(rig)
    spec = made["spec"]
    assert spec["securityContext"] == {"runAsUser": 1001}
    listener, sidecar = spec["containers"]
    assert (listener["name"], listener["imagePullPolicy"], listener["securityContext"]) == (
        "listener",
        "Always",
        {"runAsUser": 1001},
    )
    assert listener["image"] == LISTENER_IMAGE, "an unset image keeps ours"
    assert (sidecar["name"], sidecar["image"]) == ("sidecar", "busybox")
    assert spec["terminationGracePeriodSeconds"] == 60, "a field the template leaves unset stays"
    assert made["metadata"]["labels"]["test-label-key"] == "v"
    assert made["metadata"]["annotations"]["test-annotation-key"] == "v"


async def test_proxy_secret_and_environment(rig: Rig) -> None:
    rig.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "proxy-creds", "namespace": rig.namespace},
            "data": {
                "username": base64.b64encode(b"user").decode(),
                "password": base64.b64encode(b"pass").decode(),
            },
        }
    )
    await create_listener(
        rig,
        proxy={
            "http": {"url": "http://proxy:3128", "credentialSecretRef": "proxy-creds"},
            "noProxy": ["example.com"],
        },
    )
    made = await pod(rig)
    secret = await get(rig, SECRET, f"{NAME}-proxy")
    assert secret is not None
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {
        "http_proxy": "http://user:pass@proxy:3128",
        "https_proxy": "",
        "no_proxy": "example.com",
    }
    env = {e["name"]: e for e in made["spec"]["containers"][0]["env"]}
    assert env["http_proxy"]["valueFrom"]["secretKeyRef"] == {
        "name": f"{NAME}-proxy",
        "key": "http_proxy",
    }
    assert "https_proxy" not in env
    assert env["no_proxy"]["valueFrom"]["secretKeyRef"]["key"] == "no_proxy"


async def test_github_server_tls_reaches_the_config(rig: Rig) -> None:
    pem = generate().ca_pem.decode()
    await rig.objects.create(
        CONFIG_MAP, rig.namespace, {"metadata": {"name": "ca"}, "data": {"rootCA.crt": pem}}
    )
    await create_listener(
        rig,
        githubServerTLS={
            "certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "rootCA.crt"}}
        },
    )
    await pod(rig)
    secret = await get(rig, SECRET, f"{NAME}-config")
    assert secret is not None
    assert config_of(secret)["server_root_ca"] == pem


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("autoscalinglistener",),
            kubelet=False,
            listener=dataclasses.replace(FAST_LISTENER, resync_seconds=0.1),
        )
    ],
)
async def test_a_rotated_credential_updates_the_config_and_restarts_the_listener(rig: Rig) -> None:
    """Secrets are not watched: the periodic look at a settled listener finds the rotation."""
    await create_listener(rig)
    first = await pod(rig)
    token = rig.gh.add_pat()
    encoded = base64.b64encode(token.encode()).decode()
    await rig.objects.patch(
        SECRET, rig.namespace, "github-secret", {"data": {"github_token": encoded}}
    )
    await new_pod(rig, first["metadata"]["uid"])
    secret = await get(rig, SECRET, f"{NAME}-config")
    assert secret is not None
    assert config_of(secret)["github_token"] == token


async def test_a_listener_whose_set_is_gone_deletes_itself(rig: Rig) -> None:
    await rig.objects.create(
        AUTOSCALING_LISTENER,
        rig.system_namespace,
        listener_body(rig, autoscalingRunnerSetName="nope"),
    )

    async def gone() -> bool:
        return await get(rig, AUTOSCALING_LISTENER, NAME) is None

    await rig.until(gone, what="the orphaned listener gone")


async def test_a_config_the_listener_would_refuse_is_never_written(rig: Rig) -> None:
    """Checked with the listener's own model: a CA that is not PEM would make gha-listener exit
    2 at start (a crash loop), so no config Secret and no pod, and an Event says why."""
    await rig.objects.create(
        CONFIG_MAP, rig.namespace, {"metadata": {"name": "ca"}, "data": {"rootCA.crt": "not a CA"}}
    )
    ref = {"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "rootCA.crt"}}}
    await create_listener(rig, githubServerTLS=ref)

    async def reported() -> list[JSONDict] | None:
        items = (await rig.objects.list(EVENT, rig.system_namespace))["items"]
        found = [e for e in items if e["reason"] == "ListenerConfigInvalid"]
        return found or None

    [event] = await rig.until(reported, what="a ListenerConfigInvalid Event")
    assert event["message"].startswith("server_root_ca: ")
    await rig.settle()
    assert await get(rig, SECRET, f"{NAME}-config") is None
    assert await get(rig, POD, NAME) is None
