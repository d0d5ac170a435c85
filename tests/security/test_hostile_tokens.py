"""A stolen token does its job only (docs/security.md#identities): `manifests/` installed as a
user installs it, admission policies included, and each shipped identity's own token (never the
admin) tries what a thief would, through kubernetes-asyncio. Each refusal is asserted with the
real server's status: RBAC's 403 or the ValidatingAdmissionPolicy's."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from controller.autoscalinglistener.group import Group, group_role
from controller.autoscalinglistener.objects import role, role_binding
from controller.autoscalingrunnerset.objects import new_runner_set
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import PROJECT_ROOT, project_crds
from tests.sandbox.kube.test_kubectl import KUBECTL

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

Obj = dict[str, Any]
GROUP, VERSION = "actions.github.com", "v1alpha1"
SYSTEM, RUNNERS = "gha-runner-scaler-system", "arc-runners"
SET, OTHER_SET = "my-runners", "team-b-runners"
LISTENER = "my-runners-754b578d-listener"
"""The in-cluster listener's ServiceAccount, Role and RoleBinding are named like this."""
MERGE = "application/merge-patch+json"
LISTENER_POLICY = "gha-listener-scales-only"


@functools.cache
def _rendered(path: str) -> list[Obj]:
    assert KUBECTL is not None
    out = subprocess.run(
        [KUBECTL, "kustomize", str(PROJECT_ROOT / path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@dataclass
class Rig:
    kube: KubeEmulator
    apis: dict[str, client.ApiClient]

    def co(self, who: str) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.apis[who])

    def rbac(self, who: str) -> client.RbacAuthorizationV1Api:
        return client.RbacAuthorizationV1Api(self.apis[who])

    def runner_set(self, name: str = SET) -> Obj:
        found = self.kube.store.get((GROUP, "ephemeralrunnersets"), RUNNERS, name)
        assert found is not None
        return found


def _listener() -> Obj:
    """An AutoscalingListener as the controller makes it, for its Role and RoleBinding."""
    return {
        "metadata": {"name": LISTENER, "namespace": SYSTEM, "uid": "l-uid"},
        "spec": {
            "autoscalingRunnerSetNamespace": RUNNERS,
            "autoscalingRunnerSetName": SET,
            "ephemeralRunnerSetName": SET,
        },
    }


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    """The install and the docker-run example, applied past admission as the admin's `kubectl
    apply` would be (no policy matches the admin); an AutoscalingRunnerSet with its set; the
    in-cluster listener's Role and RoleBinding created with the controller's own token."""
    async with KubeEmulator() as kube:
        kube.apply_crds(project_crds())
        for doc in copy.deepcopy(
            [
                *_rendered("manifests"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RUNNERS}},
                *_rendered("manifests/examples/runner-namespace"),
                *_rendered("manifests/listener"),
            ]
        ):
            if doc["kind"] != "CustomResourceDefinition":
                kube.apply({**doc, "metadata": {"namespace": RUNNERS, **doc["metadata"]}})
        ars = yaml.safe_load(
            (PROJECT_ROOT / "manifests/examples/autoscalingrunnerset.yaml").read_text()
        )
        ars = kube.apply(ars)
        kube.apply(new_runner_set(ars, scale_set_id=1, excluded_prefixes=()))
        other = new_runner_set(ars, scale_set_id=2, excluded_prefixes=())
        other["metadata"]["name"] = OTHER_SET
        kube.apply(other)
        kube.apply(
            {
                "apiVersion": "actions.github.com/v1alpha1",
                "kind": "EphemeralRunner",
                "metadata": {"name": "my-runners-runner-abcde", "namespace": RUNNERS},
                "spec": copy.deepcopy(ars["spec"] | {"githubConfigUrl": "https://github.com/o"})
                | {
                    "githubConfigSecret": "github-config",
                    "runnerScaleSetId": 1,
                    "spec": ars["spec"]["template"]["spec"],
                },
            }
        )
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": LISTENER, "namespace": SYSTEM},
            }
        )
        tokens = {
            "admin": kube.admin_token,
            "controller": kube.service_account_token(SYSTEM, "gha-controller"),
            "listener": kube.service_account_token(SYSTEM, LISTENER),
            "docker-run listener": kube.service_account_token(RUNNERS, "gha-listener"),
        }
        apis = {
            who: client.ApiClient(await kube.configuration(token=t)) for who, t in tokens.items()
        }
        try:
            rig = Rig(kube, apis)
            rbac = rig.rbac("controller")
            await rbac.create_namespaced_role(RUNNERS, role(_listener()))
            await rbac.create_namespaced_role_binding(RUNNERS, role_binding(_listener()))
            yield rig
        finally:
            for api in apis.values():
                await api.close()


def _status(exc: client.ApiException) -> Obj:
    body: Obj = json.loads(exc.body)
    return body


async def _refused(call: Any) -> Obj:
    with pytest.raises(client.ApiException) as caught:
        await call
    return _status(caught.value)


def _rbac_message(user: str, verb: str, resource: str, name: str, *, group: str = GROUP) -> str:
    plural = resource.partition("/")[0]
    qualified = f"{plural}.{group}" if group else plural
    return (
        f'{qualified} "{name}" is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{group}" in the namespace "{RUNNERS}"'
    )


def _policy_message(resource: str, name: str, policy: str, message: str) -> str:
    return (
        f"{resource} \"{name}\" is forbidden: ValidatingAdmissionPolicy '{policy}' with binding "
        f"'{policy}' denied request: {message}"
    )


LISTENERS = {
    "listener": f"system:serviceaccount:{SYSTEM}:{LISTENER}",
    "docker-run listener": f"system:serviceaccount:{RUNNERS}:gha-listener",
}


@pytest.mark.parametrize("who", LISTENERS)
async def test_a_listener_token_moves_replicas_and_promotes_runners(rig: Rig, who: str) -> None:
    """What the listener does, as it does it: the refusals below are not a broken listener."""
    co = rig.co(who)
    patched = await co.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        RUNNERS,
        "ephemeralrunnersets",
        SET,
        {"spec": {"replicas": 3, "patchID": 7}},
        _content_type=MERGE,
    )
    assert patched["spec"]["replicas"] == 3
    runner = await co.get_namespaced_custom_object(
        GROUP, VERSION, RUNNERS, "ephemeralrunners", "my-runners-runner-abcde"
    )
    assert runner["metadata"]["name"] == "my-runners-runner-abcde"
    await co.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        RUNNERS,
        "ephemeralrunners",
        "my-runners-runner-abcde",
        {"status": {"phase": "Running"}},
        _content_type=MERGE,
    )


@pytest.mark.parametrize("who", LISTENERS)
async def test_a_listener_token_cannot_rewrite_a_runner(rig: Rig, who: str) -> None:
    status = await _refused(
        rig.co(who).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            RUNNERS,
            "ephemeralrunners",
            "my-runners-runner-abcde",
            {"spec": {"spec": {"serviceAccountName": "admin"}}},
            _content_type=MERGE,
        )
    )
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == _rbac_message(
        LISTENERS[who], "patch", "ephemeralrunners", "my-runners-runner-abcde"
    )


HOSTILE_SET_PATCHES = {
    "the runner image": (
        {
            "spec": {
                "ephemeralRunnerSpec": {
                    "spec": {"containers": [{"name": "runner", "image": "evil"}]}
                }
            }
        },
        "only spec.replicas and spec.patchID of an EphemeralRunnerSet may change; its runner "
        "template is the controller's",
    ),
    "a privileged runner with another ServiceAccount": (
        {
            "spec": {
                "replicas": 1,
                "ephemeralRunnerSpec": {
                    "spec": {
                        "serviceAccountName": "default",
                        "containers": [
                            {
                                "name": "runner",
                                "image": "x",
                                "securityContext": {"privileged": True},
                            }
                        ],
                    }
                },
            }
        },
        "only spec.replicas and spec.patchID of an EphemeralRunnerSet may change; its runner "
        "template is the controller's",
    ),
    "the GitHub config Secret": (
        {"spec": {"ephemeralRunnerSpec": {"githubConfigSecret": "team-b-config"}}},
        "only spec.replicas and spec.patchID of an EphemeralRunnerSet may change; its runner "
        "template is the controller's",
    ),
    "the scale set id of an owned set": (
        {"spec": {"ephemeralRunnerSpec": {"runnerScaleSetId": 99}}},
        "the scale set id of an EphemeralRunnerSet an AutoscalingRunnerSet owns is the "
        "controller's",
    ),
    "the owner reference (which bounds replicas by maxRunners)": (
        {"metadata": {"ownerReferences": None}},
        "the labels, annotations, owner references and finalizers of an EphemeralRunnerSet are "
        "the controller's",
    ),
}


@pytest.mark.parametrize("who", LISTENERS)
@pytest.mark.parametrize("patch", HOSTILE_SET_PATCHES.values(), ids=HOSTILE_SET_PATCHES.keys())
async def test_a_listener_token_cannot_rewrite_its_set(
    rig: Rig, who: str, patch: tuple[Obj, str]
) -> None:
    body, message = patch
    before = rig.runner_set()
    status = await _refused(
        rig.co(who).patch_namespaced_custom_object(
            GROUP, VERSION, RUNNERS, "ephemeralrunnersets", SET, body, _content_type=MERGE
        )
    )
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == _policy_message(
        f"ephemeralrunnersets.{GROUP}", SET, LISTENER_POLICY, message
    )
    assert rig.runner_set() == before


@pytest.mark.parametrize("who", LISTENERS)
async def test_a_listener_token_cannot_touch_another_set(rig: Rig, who: str) -> None:
    status = await _refused(
        rig.co(who).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            RUNNERS,
            "ephemeralrunnersets",
            OTHER_SET,
            {"spec": {"replicas": 5}},
            _content_type=MERGE,
        )
    )
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == _rbac_message(
        LISTENERS[who], "patch", "ephemeralrunnersets", OTHER_SET
    )


async def test_the_docker_run_listener_writes_the_id_of_its_own_set(rig: Rig) -> None:
    """A set no AutoscalingRunnerSet owns (the docker-run example's) takes the scale set id the
    listener registered (docs/listener.md#the-scale-set-id)."""
    runner_set = copy.deepcopy(rig.runner_set(OTHER_SET))
    del runner_set["metadata"]["ownerReferences"]
    sets = rig.kube.catalog.preferred(GROUP, "ephemeralrunnersets")
    assert sets is not None
    rig.kube.registry.commit(sets, cur=rig.runner_set(OTHER_SET), new=runner_set)
    rbac = rig.rbac("admin")
    await rbac.patch_namespaced_role(
        "gha-listener",
        RUNNERS,
        {
            "rules": [
                {
                    "apiGroups": [GROUP],
                    "resources": ["ephemeralrunnersets"],
                    "resourceNames": [OTHER_SET],
                    "verbs": ["patch"],
                }
            ]
        },
    )
    patched = await rig.co("docker-run listener").patch_namespaced_custom_object(
        GROUP,
        VERSION,
        RUNNERS,
        "ephemeralrunnersets",
        OTHER_SET,
        {"spec": {"replicas": 1, "patchID": 1, "ephemeralRunnerSpec": {"runnerScaleSetId": 42}}},
        _content_type=MERGE,
    )
    assert patched["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == 42


CONTROLLER = f"system:serviceaccount:{SYSTEM}:gha-controller"


async def test_the_controller_token_cannot_bind_anyone(rig: Rig) -> None:
    """RBAC alone lets it: it holds everything `gha-controller-runner-namespace` grants."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "backdoor", "namespace": RUNNERS},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "gha-controller-runner-namespace",
        },
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}],
    }
    status = await _refused(rig.rbac("controller").create_namespaced_role_binding(RUNNERS, binding))
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == _policy_message(
        "rolebindings.rbac.authorization.k8s.io",
        "backdoor",
        "gha-controller-listener-role-bindings",
        "the controller may only bind a listener's Role to that listener's ServiceAccount",
    )
    # The listener's own binding, to another subject.
    hijack = role_binding(_listener())
    hijack["subjects"][0]["namespace"] = RUNNERS
    status = await _refused(
        rig.rbac("controller").patch_namespaced_role_binding(LISTENER, RUNNERS, hijack)
    )
    assert status["code"] == 403


async def test_the_controller_token_cannot_write_a_role_beyond_a_listeners(rig: Rig) -> None:
    wide = role(_listener())
    wide["metadata"]["name"] = "reader"
    wide["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    status = await _refused(rig.rbac("controller").create_namespaced_role(RUNNERS, wide))
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == _policy_message(
        "roles.rbac.authorization.k8s.io",
        "reader",
        "gha-controller-listener-roles",
        "the controller may only write Roles with a listener's rules",
    )
    # Nor widen the listener's own Role.
    status = await _refused(
        rig.rbac("controller").patch_namespaced_role(LISTENER, RUNNERS, {"rules": wide["rules"]})
    )
    assert status["code"] == 403


async def test_the_controller_token_writes_a_group_role_with_a_lease_rule_per_member(
    rig: Rig,
) -> None:
    """A listener group with standby (docs/autoscaling.md#standby-for-a-group): its Role names
    each member's set and each member's Lease, one per rule, which the policy admits; a rule
    naming two Leases, or letting the group's pods create Leases, it refuses."""
    made = group_role(
        Group(namespace=RUNNERS, name="linux", home=SYSTEM),
        [SET, OTHER_SET],
        ["a-listener", "b-listener"],
    )
    created = await rig.rbac("controller").create_namespaced_role(RUNNERS, made)
    assert [rule.resource_names for rule in created.rules if rule.resource_names] == [
        [SET],
        [OTHER_SET],
        ["a-listener"],
        ["b-listener"],
    ]
    two_names = copy.deepcopy(made)
    two_names["rules"][-1]["resourceNames"] = ["a-listener", "b-listener"]
    creates = copy.deepcopy(made)
    creates["rules"][-1]["verbs"] = ["create", "get", "update"]
    for index, wide in enumerate((two_names, creates)):
        wide["metadata"]["name"] = f"wide-{index}"
        status = await _refused(rig.rbac("controller").create_namespaced_role(RUNNERS, wide))
        assert status["message"] == _policy_message(
            "roles.rbac.authorization.k8s.io",
            f"wide-{index}",
            "gha-controller-listener-roles",
            "the controller may only write Roles with a listener's rules",
        )


async def test_the_controller_token_cannot_mint_a_token_that_never_expires(rig: Rig) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {
            "name": "forever",
            "annotations": {"kubernetes.io/service-account.name": "gha-controller"},
        },
    }
    core = client.CoreV1Api(rig.apis["controller"])
    status = await _refused(core.create_namespaced_secret(SYSTEM, secret))
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == _policy_message(
        "secrets",
        "forever",
        "gha-controller-no-token-secrets",
        "the controller may not write ServiceAccount token Secrets",
    )


async def test_the_controller_still_guards_its_own_binding(rig: Rig) -> None:
    """It adds and removes the protection finalizer of its RoleBinding `gha-controller` in each
    runner namespace (docs/install.md#deleting-a-runner-namespace): a change that keeps the
    subjects passes, though that binding is no listener's."""
    rbac = rig.rbac("controller")
    finalizer = {"metadata": {"finalizers": ["actions.github.com/cleanup-protection"]}}
    patched = await rbac.patch_namespaced_role_binding("gha-controller", RUNNERS, finalizer)
    assert patched.metadata.finalizers == ["actions.github.com/cleanup-protection"]
    await rbac.patch_namespaced_role_binding(
        "gha-controller", RUNNERS, {"metadata": {"finalizers": None}}
    )
