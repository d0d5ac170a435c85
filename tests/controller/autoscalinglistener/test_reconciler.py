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
from tests.controller.conftest import (
    CONTROLLER_USER,
    FAST_LISTENER,
    LISTENER_IMAGE,
    Rig,
    RigOptions,
)

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


@pytest.mark.parametrize("proxy", [None, {"http": {"url": "http://proxy:3128"}}])
async def test_delete_sends_no_delete_of_what_is_not_there(
    rig: Rig, proxy: JSONDict | None
) -> None:
    """Before: each deletion sent three DELETEs answered 404, the proxy Secret's twice though
    no proxy was configured and the config Secret's once more after it went."""
    await create_listener(rig, **({"proxy": proxy} if proxy else {}))
    await pod(rig)
    await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, NAME)

    async def gone() -> bool:
        return await get(rig, AUTOSCALING_LISTENER, NAME) is None

    await rig.until(gone, what="listener gone")
    deletes = [
        (r.resource, r.path.split("?")[0].rsplit("/", 1)[-1], r.code)
        for r in rig.kube.requests.log
        if r.user == CONTROLLER_USER and r.verb == "delete"
    ]
    assert [d for d in deletes if d[2] == 404] == [], deletes
    secrets = sorted(name for resource, name, _ in deletes if resource == "secrets")
    assert secrets == [f"{NAME}-config", *([f"{NAME}-proxy"] if proxy else [])]


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


async def test_template_tunes_the_pod_within_the_allow_list(rig: Rig) -> None:
    """What a tenant may set by default (docs/security.md#listener-pod): labels, annotations,
    scheduling, and the listener container's resources and env of literal values or the pod's
    own fields; the template's resources replace the default ones."""
    template = {
        "metadata": {
            "labels": {"test-label-key": "v"},
            "annotations": {"test-annotation-key": "v"},
        },
        "spec": {
            "nodeSelector": {"pool": "listeners"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "listener",
                    "resources": {"requests": {"cpu": "20m", "memory": "80Mi"}},
                    "env": [
                        {"name": "TZ", "value": "UTC"},
                        {
                            "name": "NODE",
                            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                        },
                    ],
                },
            ],
        },
    }
    await create_listener(rig, template=template)
    made = await pod(rig)
    spec = made["spec"]
    assert spec["nodeSelector"] == {"pool": "listeners"}
    assert spec["tolerations"][0]["key"] == "dedicated"
    [listener] = spec["containers"]
    assert listener["resources"] == {"requests": {"cpu": "20m", "memory": "80Mi"}}
    assert [e["name"] for e in listener["env"]] == ["LISTENER_CONFIG_PATH", "TZ", "NODE"]
    assert listener["image"] == LISTENER_IMAGE
    assert spec["terminationGracePeriodSeconds"] == 60, "a field the template leaves unset stays"
    assert made["metadata"]["labels"]["test-label-key"] == "v"
    assert made["metadata"]["annotations"]["test-annotation-key"] == "v"


HOSTILE_TEMPLATE: JSONDict = {
    "spec": {
        "hostPID": True,
        "hostNetwork": True,
        "securityContext": {"runAsUser": 0},
        "volumes": [
            {"name": "root", "hostPath": {"path": "/"}},
            {"name": "theirs", "secret": {"secretName": "other-listener-config"}},
        ],
        "containers": [
            {
                "name": "listener",
                "image": "attacker/image",
                "command": ["sh", "-c", "cat /theirs/config.json"],
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "theirs", "mountPath": "/theirs"}],
                "env": [
                    {"name": "LD_PRELOAD", "value": "/theirs/x.so"},
                    {
                        "name": "TOKEN",
                        "valueFrom": {
                            "secretKeyRef": {"name": "other-listener-config", "key": "config.json"}
                        },
                    },
                ],
            },
            {"name": "sidecar", "image": "busybox"},
        ],
    }
}


async def test_a_template_beyond_the_allow_list_makes_no_pod_and_names_each_field(
    rig: Rig,
) -> None:
    """The template comes from a tenant's namespace, the pod runs in the controller's, next to
    every listener's credentials (issue 37's paths): refused whole, with an Event on the set
    (where its writer looks) and on the listener naming every field."""
    await create_listener(rig, template=HOSTILE_TEMPLATE)

    async def refused() -> list[JSONDict]:
        items = (await rig.objects.list(EVENT, None))["items"]
        return [e for e in items if e["reason"] == "ListenerTemplateRefused"]

    said = await rig.until(refused, what="ListenerTemplateRefused Events")
    await rig.settle()
    said = await refused()
    assert sorted(e["involvedObject"]["kind"] for e in said) == [
        "AutoscalingListener",
        "AutoscalingRunnerSet",
    ]
    message = said[0]["message"]
    for path in (
        "spec.hostPID",
        "spec.hostNetwork",
        "spec.securityContext",
        "spec.volumes",
        "spec.containers[0].image",
        "spec.containers[0].command",
        "spec.containers[0].securityContext",
        "spec.containers[0].volumeMounts",
        "spec.containers[0].env[0].name",
        "spec.containers[0].env[1].valueFrom.secretKeyRef",
        "spec.containers[1]",
    ):
        assert f"listenerTemplate.{path}," in message or f"listenerTemplate.{path};" in message
    assert await get(rig, POD, NAME) is None
    assert await get(rig, SECRET, f"{NAME}-config") is None, "nothing is written for it"


async def test_a_pod_made_before_its_template_was_refused_goes(rig: Rig) -> None:
    """A listener whose template is edited beyond the allow-list (or a controller restarted
    without GHA_CONTROLLER_TRUST_LISTENER_TEMPLATES) keeps no pod made from the old one."""
    await create_listener(rig)
    await pod(rig)
    await rig.objects.patch(
        AUTOSCALING_LISTENER,
        rig.system_namespace,
        NAME,
        {
            "spec": {
                "template": {"spec": {"hostNetwork": True, "containers": [{"name": "listener"}]}}
            }
        },
    )

    async def deleted() -> bool:
        found = await get(rig, POD, NAME)
        return found is None or bool(found["metadata"].get("deletionTimestamp"))

    await rig.until(deleted, what="the listener pod deleted")


TRUSTING = RigOptions(
    controllers=("autoscalinglistener",),
    kubelet=False,
    listener=dataclasses.replace(FAST_LISTENER, trust_templates=True, resync_seconds=0.1),
)
"""An operator who set GHA_CONTROLLER_TRUST_LISTENER_TEMPLATES=true."""


@pytest.mark.parametrize("rig_options", [TRUSTING])
async def test_a_trusted_template_is_laid_over_the_pod_as_arc_lays_it(rig: Rig) -> None:
    restricted = {
        "runAsUser": 1001,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    template = {
        "spec": {
            "securityContext": {"runAsUser": 1001, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "listener", "imagePullPolicy": "Always", "securityContext": restricted},
                {"name": "sidecar", "image": "busybox", "securityContext": restricted},
            ],
        },
    }
    await create_listener(rig, template=template)
    made = await pod(rig)
    spec = made["spec"]
    assert spec["securityContext"] == template["spec"]["securityContext"]
    listener, sidecar = spec["containers"]
    assert (listener["imagePullPolicy"], listener["securityContext"]) == ("Always", restricted)
    assert listener["image"] == LISTENER_IMAGE, "an unset image keeps ours"
    assert (sidecar["name"], sidecar["image"]) == ("sidecar", "busybox")


@pytest.mark.parametrize("rig_options", [TRUSTING])
async def test_a_trusted_template_still_meets_the_namespaces_pod_security(rig: Rig) -> None:
    """Trusting templates does not lift the controller namespace's Pod Security `restricted`
    (manifests/namespace.yaml): the API server refuses the pod, and the listener says why."""
    await create_listener(
        rig, template={"spec": {"hostPID": True, "containers": [{"name": "listener"}]}}
    )

    async def refused() -> list[JSONDict]:
        items = (await rig.objects.list(EVENT, rig.system_namespace))["items"]
        return [e for e in items if e["reason"] == "ListenerPodRefused"]

    [said, *_] = await rig.until(refused, what="a ListenerPodRefused Event")
    assert (
        f'pods "{NAME}" is forbidden: violates PodSecurity "restricted:v1.32": '
        "host namespaces (hostPID=true)"
    ) in said["message"]
    assert await get(rig, POD, NAME) is None


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
