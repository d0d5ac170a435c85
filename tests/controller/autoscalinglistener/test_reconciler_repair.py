"""The listener reconciler brings back what went wrong around a listener: a refused config once
its Secret or ConfigMap is fixed, an edited Role or RoleBinding; it runs ARC's listener image as
ARC does, reports a container that cannot start, writes the config as ARC's Go controller does
and leaves listeners outside its namespace alone (docs/autoscaling.md#autoscalinglistener)."""

from __future__ import annotations

import base64
import dataclasses
import logging
from typing import Any

import pytest

from controller.github.credentials import VAULT_NOT_SUPPORTED
from sandbox.tls import generate
from shared.api.kinds import AUTOSCALING_LISTENER
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
from tests.controller.autoscalinglistener.test_reconciler import (
    NAME,
    create_listener,
    get,
    listener_body,
    pod,
)
from tests.controller.conftest import CONTROLLER_USER, FAST_LISTENER, Rig, RigOptions

RESYNC = 0.1
ARC_IMAGE = "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2"


@pytest.fixture
def rig_options() -> RigOptions:
    # Templates that pin ARC's image or add a sidecar are an operator's to trust
    # (GHA_CONTROLLER_TRUST_LISTENER_TEMPLATES, docs/security.md#listener-pod).
    return RigOptions(
        controllers=("autoscalinglistener",),
        kubelet=False,
        listener=dataclasses.replace(FAST_LISTENER, resync_seconds=RESYNC, trust_templates=True),
    )


async def allow_privileged_pods(rig: Rig) -> None:
    """What an operator who trusts templates with root sidecars must also do: lift the
    controller namespace's Pod Security `restricted` (docs/security.md#listener-pod)."""
    await rig.objects.patch(
        Kind("Namespace", "namespaces", namespaced=False),
        None,
        rig.system_namespace,
        {
            "metadata": {
                "labels": {
                    f"pod-security.kubernetes.io/{mode}": "privileged"
                    for mode in ("enforce", "warn", "audit")
                }
            }
        },
    )


async def events(rig: Rig, reason: str) -> list[JSONDict]:
    items = (await rig.objects.list(EVENT, rig.system_namespace))["items"]
    return [e for e in items if e["reason"] == reason and e["involvedObject"]["name"] == NAME]


async def event(rig: Rig, reason: str) -> JSONDict:
    async def reported() -> list[JSONDict]:
        return await events(rig, reason)

    found: list[JSONDict] = await rig.until(reported, what=f"a {reason} Event")
    return found[0]


def encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# --- item 6: a refused config comes back -------------------------------------------------------


async def test_a_fixed_ca_brings_a_refused_listener_back(rig: Rig) -> None:
    """The ConfigMap is not watched: the refused listener is looked at again within the resync,
    and once the CA is PEM its config is written and its pod made."""
    await rig.objects.create(
        CONFIG_MAP, rig.namespace, {"metadata": {"name": "ca"}, "data": {"rootCA.crt": "not a CA"}}
    )
    ref = {"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "rootCA.crt"}}}
    await create_listener(rig, githubServerTLS=ref)
    await event(rig, "ListenerConfigInvalid")
    assert await get(rig, POD, NAME) is None
    pem = generate().ca_pem.decode()
    await rig.objects.patch(CONFIG_MAP, rig.namespace, "ca", {"data": {"rootCA.crt": pem}})
    await pod(rig)
    assert len(await events(rig, "ListenerConfigInvalid")) == 1, "said once, not every resync"


async def test_a_fixed_github_secret_brings_a_refused_listener_back(rig: Rig) -> None:
    await rig.objects.create(
        SECRET, rig.namespace, {"metadata": {"name": "empty"}, "data": {"other": encoded("x")}}
    )
    await create_listener(rig, githubConfigSecret="empty")
    await event(rig, "ListenerConfigInvalid")
    await rig.objects.patch(
        SECRET, rig.namespace, "empty", {"data": {"github_token": encoded(rig.gh.add_pat())}}
    )
    await pod(rig)


# --- item 7: an edited Role or RoleBinding is repaired ----------------------------------------


async def test_an_edited_role_is_repaired(rig: Rig) -> None:
    await create_listener(rig)
    await pod(rig)
    role = await get(rig, ROLE, NAME, rig.namespace)
    assert role is not None
    wanted = role["rules"]
    await rig.objects.patch(
        ROLE,
        rig.namespace,
        NAME,
        {"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]},
    )

    async def repaired() -> bool:
        found = await get(rig, ROLE, NAME, rig.namespace)
        return found is not None and found["rules"] == wanted

    await rig.until(repaired, what="the Role's rules repaired")


async def test_an_edited_role_binding_is_repaired(rig: Rig) -> None:
    await create_listener(rig)
    await pod(rig)
    binding = await get(rig, ROLE_BINDING, NAME, rig.namespace)
    assert binding is not None
    wanted = binding["subjects"]
    await rig.objects.patch(
        ROLE_BINDING,
        rig.namespace,
        NAME,
        {"subjects": [{"kind": "ServiceAccount", "namespace": rig.namespace, "name": "intruder"}]},
    )

    async def repaired() -> bool:
        found = await get(rig, ROLE_BINDING, NAME, rig.namespace)
        return found is not None and found["subjects"] == wanted

    await rig.until(repaired, what="the RoleBinding's subjects repaired")


async def test_a_binding_to_another_role_is_made_again(rig: Rig) -> None:
    """A roleRef cannot be changed in place: the binding is deleted and made again."""
    await create_listener(rig)
    await pod(rig)
    binding = await get(rig, ROLE_BINDING, NAME, rig.namespace)
    assert binding is not None
    await rig.objects.delete(ROLE_BINDING, rig.namespace, NAME)
    other = {
        "metadata": {
            "name": NAME,
            "namespace": rig.namespace,
            "labels": binding["metadata"]["labels"],
            "annotations": binding["metadata"]["annotations"],
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "other"},
        "subjects": binding["subjects"],
    }
    await rig.objects.create(ROLE_BINDING, rig.namespace, other)

    async def repaired() -> bool:
        found = await get(rig, ROLE_BINDING, NAME, rig.namespace)
        return found is not None and found["roleRef"]["name"] == NAME

    await rig.until(repaired, what="the RoleBinding bound to the listener's Role again")


# --- item 8: the listener's entrypoint and ARC's image -----------------------------------------


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("autoscalinglistener",),
            kubelet=False,
            listener=dataclasses.replace(FAST_LISTENER, entrypoint="/opt/bin/listener"),
        )
    ],
)
async def test_the_entrypoint_is_the_listener_command(rig: Rig) -> None:
    """ARC's `LISTENER_ENTRYPOINT`."""
    await create_listener(rig)
    made = await pod(rig)
    assert made["spec"]["containers"][0]["command"] == ["/opt/bin/listener"]


def arc_image_template(**container: Any) -> JSONDict:
    return {"spec": {"containers": [{"name": "listener", "image": ARC_IMAGE, **container}]}}


async def test_arcs_image_runs_arcs_listener(rig: Rig) -> None:
    """A template left from ARC that pins ARC's image runs `/ghalistener`, ARC's entrypoint,
    without our /healthz and /readyz probes, which ARC's listener does not serve."""
    await create_listener(rig, template=arc_image_template())
    [container] = (await pod(rig))["spec"]["containers"]
    assert container["image"] == ARC_IMAGE
    assert container["command"] == ["/ghalistener"]
    assert "livenessProbe" not in container
    assert "readinessProbe" not in container


async def test_a_templates_command_is_kept(rig: Rig) -> None:
    await create_listener(rig, template=arc_image_template(command=["/ghalistener", "-v"]))
    [container] = (await pod(rig))["spec"]["containers"]
    assert container["command"] == ["/ghalistener", "-v"]
    assert "livenessProbe" not in container


async def test_arcs_image_with_standby_replicas_is_refused_with_what_to_change(rig: Rig) -> None:
    await create_listener(rig, template=arc_image_template(), listenerReplicas=2)
    said = await event(rig, "ListenerTemplateInvalid")
    assert "does not support listenerReplicas 2" in said["message"]
    assert "remove the image from the listener container of listenerTemplate" in said["message"]
    await rig.settle()
    assert await get(rig, POD, NAME) is None
    await rig.objects.patch(
        AUTOSCALING_LISTENER,
        rig.system_namespace,
        NAME,
        {"spec": {"template": {"spec": {"containers": [{"name": "listener"}]}}}},
    )
    [container, *_] = (await pod(rig))["spec"]["containers"]
    assert container["command"] == ["gha-listener"]


# --- item 10: the template's containers --------------------------------------------------------


async def test_our_restriction_stays_on_our_container_when_a_template_adds_one(rig: Rig) -> None:
    """ARC's values show sidecars running as root: `runAsNonRoot` and the seccomp profile go on
    the listener container, not on the pod, so the sidecar can start."""
    sidecar = {"name": "proxy", "image": "envoy", "securityContext": {"runAsUser": 0}}
    await allow_privileged_pods(rig)
    await create_listener(rig, template={"spec": {"containers": [sidecar]}})
    made = await pod(rig)
    assert not made["spec"].get("securityContext"), "the API server defaults it to {}"
    ours, theirs = made["spec"]["containers"]
    assert ours["securityContext"]["runAsNonRoot"] is True
    assert ours["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert (ours["securityContext"]["runAsUser"], ours["securityContext"]["runAsGroup"]) == (
        10001,
        10001,
    )
    assert theirs["securityContext"] == {"runAsUser": 0}


async def test_without_a_template_the_pod_is_restricted(rig: Rig) -> None:
    await create_listener(rig)
    made = await pod(rig)
    assert made["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


async def test_a_container_that_cannot_start_is_reported_on_the_listener(rig: Rig) -> None:
    sidecar = {"name": "proxy", "image": "envoy"}
    await allow_privileged_pods(rig)
    await create_listener(rig, template={"spec": {"containers": [sidecar]}})
    await pod(rig)
    waiting = {
        "reason": "CreateContainerConfigError",
        "message": "container has runAsNonRoot and image will run as root",
    }
    await rig.objects.patch(
        POD,
        rig.system_namespace,
        NAME,
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "listener", "state": {"running": {}}},
                    {"name": "proxy", "state": {"waiting": waiting}},
                ],
            }
        },
        status=True,
    )
    said = await event(rig, "ListenerContainerWaiting")
    assert said["message"] == (
        f"container proxy of pod {NAME} cannot start: CreateContainerConfigError: "
        "container has runAsNonRoot and image will run as root"
    )
    await rig.settle()
    assert len(await events(rig, "ListenerContainerWaiting")) == 1


# --- item 11: ARC's bytes and labels -----------------------------------------------------------


async def test_the_config_is_written_as_arcs_go_controller_writes_it(rig: Rig) -> None:
    """encoding/json: compact, the struct's field order, Go maps sorted, `omitempty` left out,
    float64 without a trailing .0, a newline at the end."""
    metrics = {
        "histograms": {"b": {"labels": ["name"], "buckets": [0.5, 1.0, 10]}},
        "counters": {"z": {"labels": ["name"]}, "a": {"labels": ["repository"]}},
    }
    await create_listener(rig, metrics=metrics)
    await pod(rig)
    secret = await get(rig, SECRET, f"{NAME}-config")
    assert secret is not None
    raw = base64.b64decode(secret["data"]["config.json"]).decode()
    token = raw.split('"github_token":"')[1].split('"')[0]
    assert raw == (
        f'{{"configure_url":"{rig.config_url}","vault_type":"","vault_lookup_key":"",'
        '"github_app_id":"","github_app_installation_id":0,"github_app_private_key":"",'
        f'"github_token":"{token}","ephemeral_runner_set_namespace":"{rig.namespace}",'
        '"ephemeral_runner_set_name":"arc","max_runners":5,"min_runners":0,'
        f'"runner_scale_set_id":{rig.scale_set_id},"runner_scale_set_name":"arc",'
        '"server_root_ca":"","log_level":"info","log_format":"json",'
        '"metrics_addr":":8090","metrics_endpoint":"/metrics",'
        '"metrics":{"counters":{"a":{"labels":["repository"]},"z":{"labels":["name"]}},'
        '"histograms":{"b":{"labels":["name"],"buckets":[0.5,1,10]}}}}\n'
    )


async def test_an_unknown_version_label_is_kept_empty_on_every_child(rig: Rig) -> None:
    """ARC labels a listener `app.kubernetes.io/version: ""` when the set has no version; its
    children carry the label as it is."""
    await create_ars(rig)
    body = listener_body(rig)
    body["metadata"]["labels"]["app.kubernetes.io/version"] = ""
    await rig.objects.create(AUTOSCALING_LISTENER, rig.system_namespace, body)
    made = await pod(rig)
    children = [
        made,
        await get(rig, SERVICE_ACCOUNT, NAME),
        await get(rig, ROLE, NAME, rig.namespace),
        await get(rig, ROLE_BINDING, NAME, rig.namespace),
    ]
    for child in children:
        assert child is not None
        assert child["metadata"]["labels"]["app.kubernetes.io/version"] == ""


# --- item 2: listeners in another namespace ----------------------------------------------------


async def test_a_listener_in_another_namespace_is_left_alone(rig: Rig) -> None:
    """ARC's old listener may live in `arc-systems`, where the controller may write nothing:
    it is not reconciled, rather than retried on 403s for ever."""
    await create_ars(rig)
    body = listener_body(rig)
    body["metadata"]["namespace"] = rig.namespace
    await rig.objects.create(AUTOSCALING_LISTENER, rig.namespace, body)
    await rig.settle(delayed=True)
    listener = await get(rig, AUTOSCALING_LISTENER, NAME, rig.namespace)
    assert listener is not None
    assert not listener["metadata"].get("finalizers")
    touched = [
        r
        for r in rig.kube.requests.log
        if r.user == CONTROLLER_USER
        and r.namespace == rig.namespace
        and r.resource == "autoscalinglisteners"
        and r.verb not in ("list", "watch")
    ]
    assert touched == []


async def test_a_listener_in_another_namespace_is_said_once_and_forgotten_with_it(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """Said once per object, whatever wakes it; a listener made again under the same name is
    another object, said again (the memory went with the first one)."""
    caplog.set_level(logging.INFO, logger="controller.autoscalinglistener")
    await create_ars(rig)
    body = listener_body(rig)
    body["metadata"]["namespace"] = rig.namespace

    def said() -> int:
        return sum("not reconciled: listeners live in" in r.getMessage() for r in caplog.records)

    async def said_times(times: int) -> bool:
        return said() == times

    await rig.objects.create(AUTOSCALING_LISTENER, rig.namespace, body)
    await rig.until(lambda: said_times(1), what="the foreign listener said")
    await rig.objects.patch(
        AUTOSCALING_LISTENER, rig.namespace, NAME, {"metadata": {"labels": {"woken": "1"}}}
    )
    await rig.settle()
    assert said() == 1
    await rig.objects.delete(AUTOSCALING_LISTENER, rig.namespace, NAME)
    await rig.settle()
    await rig.objects.create(AUTOSCALING_LISTENER, rig.namespace, body)
    await rig.until(lambda: said_times(2), what="the new foreign listener said")


async def test_key_vault_credentials_are_refused_with_the_sets_message(rig: Rig) -> None:
    """The same refusal as on the AutoscalingRunnerSet (controller/github/credentials.py), said
    once; nothing is made for the listener."""
    vault = {"url": "https://v", "tenantId": "t", "clientId": "c", "certificatePath": "/c.pem"}
    await create_listener(rig, vaultConfig={"type": "azure_key_vault", "azureKeyVault": vault})
    said = await event(rig, "VaultNotSupported")
    assert said["message"] == VAULT_NOT_SUPPORTED
    await rig.objects.patch(
        AUTOSCALING_LISTENER, rig.system_namespace, NAME, {"metadata": {"labels": {"w": "1"}}}
    )
    await rig.settle()
    assert len(await events(rig, "VaultNotSupported")) == 1
    assert await get(rig, SERVICE_ACCOUNT, NAME) is None
    assert await get(rig, POD, NAME) is None
