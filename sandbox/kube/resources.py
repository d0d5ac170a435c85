"""The resource types the emulator serves: built-ins and those defined by CRDs.

Each type carries the strategy facts of its real registry (store.go and the per-type strategies):
whether it has a status subresource, uses metadata.generation, allows unconditional updates or
create-on-update, which field selectors it supports and whether strategic merge patch applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    status: bool = False
    generation: bool = False
    unconditional_update: bool = True
    create_on_update: bool = False
    strategic: bool = True
    return_deleted: bool = False
    field_selectors: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    schema: Obj | None = None
    printer_columns: tuple[Obj, ...] = ()
    versions: tuple[str, ...] = ()
    virtual: bool = False
    crd: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one bucket per group and plural, whatever version is asked for."""
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def has_subresource(self, sub: str) -> bool:
        return sub in self.subresources or (sub == "status" and self.status)

    def supports_field(self, name: str) -> bool:
        return name in ("metadata.name", "metadata.namespace") or name in self.field_selectors

    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


def _core(plural: str, kind: str, *, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType(
        group="", version="v1", plural=plural, kind=kind, namespaced=namespaced, **kw
    )


def _grp(group: str, version: str, *, plural: str, kind: str, **kw: Any) -> ResourceType:
    kw.setdefault("namespaced", True)
    return ResourceType(group=group, version=version, plural=plural, kind=kind, **kw)


POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)

RBAC = "rbac.authorization.k8s.io"
CREATE_ONLY = ("create",)

BUILTINS: tuple[ResourceType, ...] = (
    _core(
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        status=True,
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        field_selectors=("status.phase",),
        subresources=("status", "finalize"),
    ),
    _core(
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        status=True,
        return_deleted=True,
        field_selectors=POD_FIELDS,
        subresources=("status", "log", "eviction"),
    ),
    _core("secrets", "Secret", field_selectors=("type",)),
    _core("configmaps", "ConfigMap", short_names=("cm",)),
    _core(
        "serviceaccounts",
        "ServiceAccount",
        short_names=("sa",),
        subresources=("token",),
        return_deleted=True,
    ),
    _core(
        "events",
        "Event",
        short_names=("ev",),
        field_selectors=(
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ),
    ),
    _core(
        "nodes",
        "Node",
        namespaced=False,
        short_names=("no",),
        status=True,
        field_selectors=("spec.unschedulable",),
        subresources=("status",),
    ),
    _core(
        "services",
        "Service",
        short_names=("svc",),
        categories=("all",),
        status=True,
        create_on_update=True,
        return_deleted=True,
    ),
    _core("endpoints", "Endpoints", short_names=("ep",), create_on_update=True),
    _core(
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        short_names=("pvc",),
        status=True,
        return_deleted=True,
    ),
    _core(
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        short_names=("pv",),
        status=True,
        return_deleted=True,
    ),
    _core("limitranges", "LimitRange", short_names=("limits",)),
    _core(
        "resourcequotas", "ResourceQuota", short_names=("quota",), status=True, return_deleted=True
    ),
    _core("podtemplates", "PodTemplate", return_deleted=True),
    _core(
        "replicationcontrollers",
        "ReplicationController",
        short_names=("rc",),
        categories=("all",),
        status=True,
        generation=True,
        subresources=("status", "scale"),
    ),
    _grp("events.k8s.io", "v1", plural="events", kind="Event", short_names=("ev",)),
    _grp(
        "coordination.k8s.io",
        "v1",
        plural="leases",
        kind="Lease",
        unconditional_update=False,
        create_on_update=True,
    ),
    _grp(RBAC, "v1", plural="roles", kind="Role", create_on_update=True),
    _grp(RBAC, "v1", plural="rolebindings", kind="RoleBinding", create_on_update=True),
    _grp(
        RBAC,
        "v1",
        plural="clusterroles",
        kind="ClusterRole",
        namespaced=False,
        create_on_update=True,
    ),
    _grp(
        RBAC,
        "v1",
        plural="clusterrolebindings",
        kind="ClusterRoleBinding",
        namespaced=False,
        create_on_update=True,
    ),
    _grp(
        "apiextensions.k8s.io",
        "v1",
        plural="customresourcedefinitions",
        kind="CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        status=True,
        generation=True,
    ),
    _grp(
        "authorization.k8s.io",
        "v1",
        plural="selfsubjectaccessreviews",
        kind="SelfSubjectAccessReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        virtual=True,
    ),
    _grp(
        "authorization.k8s.io",
        "v1",
        plural="subjectaccessreviews",
        kind="SubjectAccessReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        virtual=True,
    ),
    _grp(
        "authorization.k8s.io",
        "v1",
        plural="localsubjectaccessreviews",
        kind="LocalSubjectAccessReview",
        verbs=CREATE_ONLY,
        virtual=True,
    ),
    _grp(
        "authorization.k8s.io",
        "v1",
        plural="selfsubjectrulesreviews",
        kind="SelfSubjectRulesReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        virtual=True,
    ),
    _grp(
        "authentication.k8s.io",
        "v1",
        plural="tokenreviews",
        kind="TokenReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        virtual=True,
    ),
    _grp(
        "authentication.k8s.io",
        "v1",
        plural="selfsubjectreviews",
        kind="SelfSubjectReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        virtual=True,
    ),
    _grp(
        "apps",
        "v1",
        plural="deployments",
        kind="Deployment",
        short_names=("deploy",),
        categories=("all",),
        status=True,
        generation=True,
        subresources=("status", "scale"),
    ),
    _grp(
        "apps",
        "v1",
        plural="replicasets",
        kind="ReplicaSet",
        short_names=("rs",),
        categories=("all",),
        status=True,
        generation=True,
        subresources=("status", "scale"),
    ),
    _grp(
        "apps",
        "v1",
        plural="statefulsets",
        kind="StatefulSet",
        short_names=("sts",),
        categories=("all",),
        status=True,
        generation=True,
        subresources=("status", "scale"),
    ),
    _grp(
        "apps",
        "v1",
        plural="daemonsets",
        kind="DaemonSet",
        short_names=("ds",),
        categories=("all",),
        status=True,
        generation=True,
    ),
    _grp(
        "batch", "v1", plural="jobs", kind="Job", categories=("all",), status=True, generation=True
    ),
    _grp(
        "batch",
        "v1",
        plural="cronjobs",
        kind="CronJob",
        short_names=("cj",),
        categories=("all",),
        status=True,
        generation=True,
    ),
    _grp(
        "policy",
        "v1",
        plural="poddisruptionbudgets",
        kind="PodDisruptionBudget",
        short_names=("pdb",),
        status=True,
        generation=True,
    ),
    _grp(
        "networking.k8s.io",
        "v1",
        plural="networkpolicies",
        kind="NetworkPolicy",
        short_names=("netpol",),
        generation=True,
    ),
    _grp(
        "networking.k8s.io",
        "v1",
        plural="ingresses",
        kind="Ingress",
        short_names=("ing",),
        status=True,
        generation=True,
    ),
    _grp(
        "networking.k8s.io",
        "v1",
        plural="ingressclasses",
        kind="IngressClass",
        namespaced=False,
        generation=True,
    ),
    _grp(
        "certificates.k8s.io",
        "v1",
        plural="certificatesigningrequests",
        kind="CertificateSigningRequest",
        namespaced=False,
        short_names=("csr",),
        status=True,
        subresources=("approval", "status"),
        field_selectors=("spec.signerName",),
    ),
    _grp(
        "apiregistration.k8s.io",
        "v1",
        plural="apiservices",
        kind="APIService",
        namespaced=False,
        categories=("api-extensions",),
        status=True,
    ),
    _grp("storage.k8s.io", "v1", plural="csistoragecapacities", kind="CSIStorageCapacity"),
    _grp(
        "storage.k8s.io",
        "v1",
        plural="storageclasses",
        kind="StorageClass",
        namespaced=False,
        short_names=("sc",),
        return_deleted=True,
    ),
    _grp(
        "storage.k8s.io",
        "v1",
        plural="csidrivers",
        kind="CSIDriver",
        namespaced=False,
        return_deleted=True,
    ),
    _grp(
        "storage.k8s.io",
        "v1",
        plural="csinodes",
        kind="CSINode",
        namespaced=False,
        return_deleted=True,
    ),
    _grp(
        "storage.k8s.io",
        "v1",
        plural="volumeattachments",
        kind="VolumeAttachment",
        namespaced=False,
        status=True,
        return_deleted=True,
    ),
    _grp("apps", "v1", plural="controllerrevisions", kind="ControllerRevision"),
    _grp(
        "autoscaling",
        "v2",
        plural="horizontalpodautoscalers",
        kind="HorizontalPodAutoscaler",
        short_names=("hpa",),
        categories=("all",),
        status=True,
    ),
    _grp(
        "discovery.k8s.io",
        "v1",
        plural="endpointslices",
        kind="EndpointSlice",
        field_selectors=("addressType",),
    ),
    _grp("node.k8s.io", "v1", plural="runtimeclasses", kind="RuntimeClass", namespaced=False),
    _grp(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        plural="flowschemas",
        kind="FlowSchema",
        namespaced=False,
        status=True,
        generation=True,
    ),
    _grp(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        plural="prioritylevelconfigurations",
        kind="PriorityLevelConfiguration",
        namespaced=False,
        status=True,
        generation=True,
    ),
    _grp(
        "scheduling.k8s.io",
        "v1",
        plural="priorityclasses",
        kind="PriorityClass",
        namespaced=False,
        short_names=("pc",),
    ),
    _grp(
        "admissionregistration.k8s.io",
        "v1",
        plural="validatingwebhookconfigurations",
        kind="ValidatingWebhookConfiguration",
        namespaced=False,
        generation=True,
    ),
    _grp(
        "admissionregistration.k8s.io",
        "v1",
        plural="mutatingwebhookconfigurations",
        kind="MutatingWebhookConfiguration",
        namespaced=False,
        generation=True,
    ),
    _grp(
        "admissionregistration.k8s.io",
        "v1",
        plural="validatingadmissionpolicies",
        kind="ValidatingAdmissionPolicy",
        namespaced=False,
        status=True,
        generation=True,
    ),
    _grp(
        "admissionregistration.k8s.io",
        "v1",
        plural="validatingadmissionpolicybindings",
        kind="ValidatingAdmissionPolicyBinding",
        namespaced=False,
        generation=True,
    ),
)

# Types kubectl may send as protobuf; their own strategies cover the rest.
SEEDED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def crd_types(crd: Obj) -> list[ResourceType]:
    """One ResourceType per served version of a CustomResourceDefinition."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    served = [v for v in spec.get("versions", []) if v.get("served", True)]
    version_names = tuple(v["name"] for v in served)
    out = []
    for ver in served:
        subs = ver.get("subresources") or {}
        schema = (ver.get("schema") or {}).get("openAPIV3Schema")
        subresources = tuple(s for s in ("status", "scale") if s in subs)
        out.append(
            ResourceType(
                group=spec["group"],
                version=ver["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular", names["kind"].lower()),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in subs,
                generation=True,
                unconditional_update=False,
                strategic=False,
                field_selectors=tuple(
                    f["jsonPath"].lstrip(".") for f in ver.get("selectableFields") or ()
                ),
                subresources=subresources,
                schema=schema,
                printer_columns=tuple(ver.get("additionalPrinterColumns") or ()),
                versions=version_names,
                crd=crd["metadata"]["name"],
            )
        )
    return out


@dataclass
class Catalog:
    """The types served right now, by group/version/plural, kind and short name."""

    by_gvr: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)

    def add(self, rt: ResourceType) -> None:
        self.by_gvr[(rt.group, rt.version, rt.plural)] = rt

    def remove_crd(self, crd_name: str) -> None:
        for k, rt in list(self.by_gvr.items()):
            if rt.crd == crd_name:
                del self.by_gvr[k]

    def get(self, group: str, *, version: str, plural: str) -> ResourceType | None:
        return self.by_gvr.get((group, version, plural))

    def preferred(self, group: str, plural: str) -> ResourceType | None:
        """The type for a storage key, in its first served version."""
        for rt in self.by_gvr.values():
            if rt.group == group and rt.plural == plural:
                return rt
        return None

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self.by_gvr.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None

    def groups(self) -> dict[str, list[str]]:
        """Group name to served versions, in registration order."""
        out: dict[str, list[str]] = {}
        for rt in self.by_gvr.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.by_gvr.values() if rt.group == group and rt.version == version]

    def all(self) -> list[ResourceType]:
        return list(self.by_gvr.values())
