"""Listener groups (docs/autoscaling.md#listener-groups): the AutoscalingRunnerSets of one
namespace that name the same group (annotation `gha-runner-scaler/listener-group`) and share
their GitHub config are served by one listener pod, one `gha-listener` process with a config
file per set (with standby, a pod per replica, each serving every member, and a Lease per
member: docs/autoscaling.md#standby-for-a-group). Each set keeps its AutoscalingListener; the
group's pods, ServiceAccount, config Secret, Role and RoleBinding are named after the group and
made from its members.

Pure functions: who belongs to a group (and who is refused, and why), and the group's objects.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller.autoscalinglistener.objects import (
    RBAC_GROUP,
    encoded,
    go_json,
    listener_pod,
    listener_replicas,
    owner_reference,
    role_rules,
)
from controller.runners.objects import json_digest
from shared.api.names import (
    ANNOTATION_INTEGRITY_HASH,
    ANNOTATION_LISTENER_GROUP,
    LABEL_LISTENER_GROUP,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LISTENER_CONFIG_MOUNT_PATH,
)
from shared.kube.views import is_deleting, metadata_of
from shared.typedefs import JSONDict, RawOwnerReference

MAX_MEMBERS = 100
"""Sets one group serves: its config Secret holds a config per member (about 1 KB with a PAT,
3 KB with an App's key) and a Secret holds at most 1 MiB."""
GROUP_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")
"""A DNS label of at most 40 characters: the group's objects are `<group>-<8 hex>-listeners`."""

SHARED_FIELDS = (
    "githubConfigUrl",
    "githubConfigSecret",
    "githubServerTLS",
    "proxy",
    "vaultConfig",
    "image",
    "imagePullSecrets",
    "template",
    "serviceAccountMetadata",
    "roleMetadata",
    "roleBindingMetadata",
    "configSecretMetadata",
)
"""What the members of a group must have alike: the GitHub config (URL, credentials Secret, TLS,
proxy) that the one process holds for all of them, and what the one pod is made from."""


def group_of(listener: JSONDict) -> str:
    """The group a listener names ("" when it has its own pod)."""
    return str((metadata_of(listener).get("annotations") or {}).get(ANNOTATION_LISTENER_GROUP, ""))


def group_problem(listener: JSONDict) -> str | None:
    """Why a listener cannot be in the group it names whatever the other members are."""
    group = group_of(listener)
    where = f"annotation {ANNOTATION_LISTENER_GROUP}"
    if not GROUP_NAME.fullmatch(group):
        return (
            f'{where} "{group[:64]}" is not a group name: lower-case letters, digits and "-", '
            "at most 40, starting and ending with a letter or digit"
        )
    return None


def _runner_namespace(listener: JSONDict) -> str:
    return str((listener.get("spec") or {}).get("autoscalingRunnerSetNamespace", ""))


def _age(listener: JSONDict) -> tuple[str, str]:
    meta = metadata_of(listener)
    return str(meta.get("creationTimestamp", "")), meta["name"]


@dataclass(frozen=True, slots=True)
class Group:
    """A listener group as the cache shows it: its accepted members, oldest first (the first
    sets what the others must share), and the listeners that name it but are refused."""

    namespace: str
    """The runner namespace: a group never spans two."""
    name: str
    home: str
    """The controller's namespace, where the listeners, the pod and its Secrets live."""
    members: tuple[JSONDict, ...] = ()
    refused: Mapping[str, str] = field(default_factory=dict)
    """Listener name: why it is not served by the group."""

    @property
    def object_name(self) -> str:
        """The name of the group's pod, ServiceAccount, Role and RoleBinding: the group and a
        digest of its namespace, so groups of one name in two namespaces never meet."""
        digest = hashlib.sha256(f"{self.namespace}/{self.name}".encode()).hexdigest()[:8]
        return f"{self.name}-{digest}-listeners"

    @property
    def memory_key(self) -> str:
        """Where the reconciler keeps the group pod's restart backoff, shared by its members."""
        return f"listener-group/{self.namespace}/{self.name}"

    def member_names(self) -> list[str]:
        return [metadata_of(member)["name"] for member in self.members]

    @property
    def replicas(self) -> int:
        """The group's listener pods: the most any member asks for (`listenerReplicas`), since
        every pod serves every member; a member asking fewer gets standby too, at no cost to
        it (docs/autoscaling.md#standby-for-a-group)."""
        return max((listener_replicas(member) for member in self.members), default=1)

    def served(self, member: JSONDict) -> JSONDict:
        """`member` as the group's pods serve it: with the group's replicas, so that its config
        names its standby Lease whenever the group runs more than one pod (a set without one
        would have a session in every pod)."""
        return {**member, "spec": {**(member.get("spec") or {}), "listenerReplicas": self.replicas}}


def group_members(listener: JSONDict, listeners: Iterable[JSONDict]) -> Group:
    """The group `listener` names, from every listener the cache holds. A member is a listener
    of the same controller namespace, runner namespace and group, not being deleted, whose
    group is valid; the oldest sets the shared fields, and a member that differs in one is
    refused, never merged: its credentials, or the other members', would be in a process
    serving sets of another GitHub config."""
    meta = metadata_of(listener)
    namespace, name = _runner_namespace(listener), group_of(listener)
    candidates = sorted(
        (
            other
            for other in listeners
            if metadata_of(other)["namespace"] == meta["namespace"]
            and _runner_namespace(other) == namespace
            and group_of(other) == name
            and not is_deleting(other)
            and group_problem(other) is None
        ),
        key=_age,
    )
    members: list[JSONDict] = []
    refused: dict[str, str] = {}
    for candidate in candidates:
        if not members:
            members.append(candidate)
            continue
        first = members[0]
        if len(members) == MAX_MEMBERS:
            refused[metadata_of(candidate)["name"]] = (
                f"listener group {name} of namespace {namespace} serves {MAX_MEMBERS} sets "
                "already, the most one pod's config Secret holds: name another group"
            )
            continue
        differs = [
            key
            for key in SHARED_FIELDS
            if (candidate.get("spec") or {}).get(key) != (first.get("spec") or {}).get(key)
        ]
        if differs:
            refused[metadata_of(candidate)["name"]] = (
                f"listener group {name} of namespace {namespace} is served with the GitHub "
                f"config and pod of its first member, the AutoscalingRunnerSet "
                f"{(first.get('spec') or {}).get('autoscalingRunnerSetName')}; this set's "
                + ", ".join(f"spec.{key}" for key in differs)
                + " differ: make them the same, or name another group"
            )
        else:
            members.append(candidate)
    return Group(
        namespace=namespace,
        name=name,
        home=str(meta["namespace"]),
        members=tuple(members),
        refused=refused,
    )


# --- the group's objects -------------------------------------------------------------------------


def _owners(group: Group) -> list[RawOwnerReference]:
    """Every member owns the group's pod, none as controller: the garbage collector deletes it
    once no member is left (the pod is made again whenever a member joins or leaves, so its
    owners are the members). The group's other objects are deleted by its last member."""
    return [
        {**owner_reference(member), "controller": False, "blockOwnerDeletion": False}
        for member in group.members
    ]


def _labels(group: Group) -> dict[str, str]:
    return {
        LABEL_SCALE_SET_NAMESPACE: group.namespace,
        LABEL_LISTENER_GROUP: group.name,
    }


def _rbac_labels(group: Group) -> dict[str, str]:
    return {
        **_labels(group),
        LABEL_LISTENER_NAMESPACE: group.home,
        LABEL_LISTENER_NAME: group.object_name,
    }


def group_listener(group: Group) -> JSONDict:
    """The group's pod is made as a listener's: from its first member's spec (what every member
    shares), under the group's name and labels."""
    first = group.members[0]
    labels = {
        key: value
        for key, value in (metadata_of(first).get("labels") or {}).items()
        if key != LABEL_SCALE_SET_NAME
    }
    return {
        "apiVersion": first.get("apiVersion"),
        "kind": first.get("kind"),
        "metadata": {
            "name": group.object_name,
            "namespace": group.home,
            "labels": {**labels, **_labels(group)},
        },
        "spec": {**(first.get("spec") or {}), "listenerReplicas": group.replicas},
    }


def group_service_account(group: Group) -> JSONDict:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": group.object_name,
            "namespace": group.home,
            "labels": _labels(group),
            "annotations": {ANNOTATION_INTEGRITY_HASH: json_digest({})},
        },
    }


def group_role(group: Group, runner_sets: Iterable[str], leases: Iterable[str] = ()) -> JSONDict:
    """The Role of the group's pods: the listener's rules, patch naming each of `runner_sets`
    (its members' EphemeralRunnerSets: exactly those, docs/autoscaling.md#listener-groups) and,
    with standby, get and update naming each of `leases` (its members' Leases)."""
    rules = role_rules(*sorted(set(runner_sets)), leases=sorted(set(leases)))
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "Role",
        "metadata": {
            "name": group.object_name,
            "namespace": group.namespace,
            "labels": _rbac_labels(group),
            "annotations": {ANNOTATION_INTEGRITY_HASH: json_digest(rules)},
        },
        "rules": rules,
    }


def group_role_binding(group: Group) -> JSONDict:
    binding = {
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": group.object_name},
        "subjects": [
            {"kind": "ServiceAccount", "namespace": group.home, "name": group.object_name}
        ],
    }
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": group.object_name,
            "namespace": group.namespace,
            "labels": _rbac_labels(group),
            "annotations": {ANNOTATION_INTEGRITY_HASH: json_digest(binding)},
        },
        **binding,
    }


def group_config_secret(group: Group, configs: Mapping[str, JSONDict]) -> JSONDict:
    """One `<listener>.json` per member: the folder `gha-listener` serves one set per file of
    (docs/listener.md#many-scale-sets-in-one-process)."""
    data = {f"{name}.json": go_json(config) for name, config in sorted(configs.items())}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{group.object_name}-config",
            "namespace": group.home,
            "labels": _labels(group),
            "annotations": {ANNOTATION_INTEGRITY_HASH: json_digest(data)},
        },
        "data": encoded(data),
    }


def group_proxy_secret(group: Group, data: Mapping[str, str]) -> JSONDict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{group.object_name}-proxy",
            "namespace": group.home,
            "labels": _labels(group),
            "annotations": {ANNOTATION_INTEGRITY_HASH: json_digest(dict(data))},
        },
        "data": encoded(data),
    }


def group_pod(
    group: Group,
    *,
    config_digest: str,
    metrics_addr: str,
    entrypoint: str,
    resources: Mapping[str, Mapping[str, str]] | None,
    replica: int = 0,
) -> JSONDict:
    """A pod of the group (one per replica, each serving every member): a listener pod whose
    `LISTENER_CONFIG_PATH` is the folder of the members' configs, owned by every member."""
    pod = listener_pod(
        group_listener(group),
        config_digest=config_digest,
        metrics_addr=metrics_addr,
        replica=replica,
        entrypoint=entrypoint,
        resources=resources,
        config_path=LISTENER_CONFIG_MOUNT_PATH,
    )
    pod["metadata"]["ownerReferences"] = _owners(group)
    return pod
