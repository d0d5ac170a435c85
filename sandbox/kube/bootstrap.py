"""What a booted cluster holds before anyone writes to it (docs/sandbox-kube.md#what-a-booted-
emulator-contains): the bootstrap RBAC policy, the control-plane node with its Running
kube-system pods (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, two coredns
replicas, kube-proxy), the system PriorityClasses and the `kubernetes` and `kube-dns` Services.

The kube-system pods run on their own node, `sandbox-control-plane` (tainted NoSchedule, as a
kubeadm or kind control plane is), whose pods are written here as its kubelet would report them;
the simulated kubelet runs only the pods of its own node, so tests that count container runs never
see them.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from sandbox.kube.clock import timestamp
from sandbox.kube.kubelet.node import node_object, node_status
from sandbox.kube.registry import Registry
from sandbox.kube.resources import ResourceType
from sandbox.kube.status import ApiError

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
CONTROL_PLANE = "sandbox-control-plane"
CONTROL_PLANE_IP = "10.0.0.2"
VERSION = "v1.32.4"
KUBERNETES_IP = "10.96.0.1"
DNS_IP = "10.96.0.10"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _urls(urls: list[str], verbs: list[str] | None = None) -> Obj:
    return {"nonResourceURLs": urls, "verbs": verbs or ["get"]}


# What view, edit and admin aggregate on a real cluster (the aggregate-to-* roles' rules).
_VIEW_CORE = [
    "configmaps",
    "endpoints",
    "persistentvolumeclaims",
    "persistentvolumeclaims/status",
    "pods",
    "replicationcontrollers",
    "replicationcontrollers/scale",
    "serviceaccounts",
    "services",
    "services/status",
]
_VIEW_RULES = [
    _rule([""], _VIEW_CORE, READ),
    _rule(
        [""],
        [
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
        ],
        READ,
    ),
    _rule([""], ["namespaces"], READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], READ),
    _rule(
        ["apps"],
        [
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
        READ,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
    _rule(
        ["networking.k8s.io"],
        ["ingresses", "ingresses/status", "networkpolicies"],
        READ,
    ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
]
_EDIT_RULES = [
    _rule([""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets"], READ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule(
        [""],
        [
            "pods",
            "pods/attach",
            "pods/exec",
            "pods/portforward",
            "pods/proxy",
            "configmaps",
            "endpoints",
            "events",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "secrets",
            "serviceaccounts",
            "services",
            "services/proxy",
        ],
        WRITE,
    ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(
        ["apps"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
        WRITE,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], WRITE),
    _rule(["coordination.k8s.io"], ["leases"], [*READ, *WRITE]),
    *_VIEW_RULES,
]
_ADMIN_RULES = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule([RBAC], ["rolebindings", "roles"], [*WRITE, *READ]),
    *_EDIT_RULES,
]


def _role(name: str, rules: list[Obj], *, aggregate: str = "") -> Obj:
    labels = dict(BOOTSTRAP_LABELS)
    if aggregate:
        labels[f"rbac.authorization.k8s.io/aggregate-to-{aggregate}"] = "true"
    meta: Obj = {"name": name, "labels": labels, "annotations": dict(AUTOUPDATE)}
    return {"metadata": meta, "rules": rules}


def _aggregated(name: str, rules: list[Obj], *, into: str = "") -> Obj:
    """admin, edit and view: an aggregationRule, and the rules the aggregator filled in."""
    role = _role(name, rules, aggregate=into)
    role["aggregationRule"] = {
        "clusterRoleSelectors": [
            {"matchLabels": {f"rbac.authorization.k8s.io/aggregate-to-{name}": "true"}}
        ]
    }
    return role


CLUSTER_ROLES: list[Obj] = [
    _role(
        "cluster-admin",
        [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])],
    ),
    _aggregated("admin", _ADMIN_RULES),
    _aggregated("edit", _EDIT_RULES, into="admin"),
    _aggregated("view", _VIEW_RULES, into="edit"),
    _role("system:aggregate-to-admin", _ADMIN_RULES[:2], aggregate="admin"),
    _role("system:aggregate-to-edit", _EDIT_RULES[: -len(_VIEW_RULES)], aggregate="edit"),
    _role("system:aggregate-to-view", _VIEW_RULES, aggregate="view"),
    _role(
        "system:discovery",
        [
            _urls(
                [
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ]
            )
        ],
    ),
    _role(
        "system:basic-user",
        [
            _rule(
                ["authorization.k8s.io"],
                ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ["create"],
            ),
            _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
        ],
    ),
    _role(
        "system:public-info-viewer",
        [_urls(["/healthz", "/livez", "/readyz", "/version", "/version/"])],
    ),
    _role(
        "system:auth-delegator",
        [
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
        ],
    ),
    _role(
        "system:monitoring",
        [
            _urls(
                [
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ]
            )
        ],
    ),
    _role(
        "system:service-account-issuer-discovery",
        [_urls(["/.well-known/openid-configuration", "/openid/v1/jwks"])],
    ),
    _role(
        "system:heapster",
        [
            _rule([""], ["events", "namespaces", "nodes", "pods"], READ),
            _rule(["extensions"], ["deployments"], READ),
        ],
    ),
    _role(
        "system:node-proxier",
        [
            _rule([""], ["endpoints", "services"], ["list", "watch"]),
            _rule([""], ["nodes"], READ),
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
            _rule(["discovery.k8s.io"], ["endpointslices"], ["list", "watch"]),
        ],
    ),
    _role(
        "system:kube-dns",
        [_rule([""], ["endpoints", "services"], ["list", "watch"])],
    ),
    _role(
        "system:kube-scheduler",
        [
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
            _rule(["coordination.k8s.io"], ["leases"], ["create"]),
            _rule(
                ["coordination.k8s.io"],
                ["leases"],
                ["get", "update"],
            )
            | {"resourceNames": ["kube-scheduler"]},
            _rule([""], ["nodes"], READ),
            _rule([""], ["pods"], [*READ, "delete"]),
            _rule([""], ["bindings", "pods/binding"], ["create"]),
            _rule([""], ["pods/status"], ["patch", "update"]),
        ],
    ),
    _role(
        "system:kube-controller-manager",
        [
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
            _rule(["coordination.k8s.io"], ["leases"], ["create"]),
            _rule(["coordination.k8s.io"], ["leases"], ["get", "update"])
            | {"resourceNames": ["kube-controller-manager"]},
            _rule(["*"], ["*"], ["list", "watch"]),
            _rule([""], ["secrets", "serviceaccounts"], ["create"]),
            _rule([""], ["secrets"], ["delete"]),
            _rule([""], ["configmaps", "namespaces", "secrets", "serviceaccounts"], ["get"]),
            _rule([""], ["secrets", "serviceaccounts"], ["update"]),
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
            _rule([""], ["serviceaccounts/token"], ["create"]),
        ],
    ),
    _role(
        "system:node",
        [
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(
                ["authorization.k8s.io"],
                ["localsubjectaccessreviews", "subjectaccessreviews"],
                ["create"],
            ),
            _rule([""], ["services"], READ),
            _rule([""], ["nodes"], ["create", *READ]),
            _rule([""], ["nodes/status"], ["patch", "update"]),
            _rule([""], ["nodes"], ["patch", "update"]),
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
            _rule([""], ["pods"], READ),
            _rule([""], ["pods"], ["create", "delete"]),
            _rule([""], ["pods/status"], ["patch", "update"]),
            _rule([""], ["pods/eviction"], ["create"]),
            _rule([""], ["configmaps", "secrets"], ["get", "list", "watch"]),
            _rule([""], ["persistentvolumeclaims", "persistentvolumes"], ["get"]),
            _rule([""], ["endpoints"], ["get"]),
            _rule(["certificates.k8s.io"], ["certificatesigningrequests"], ["create", *READ]),
            _rule(
                ["coordination.k8s.io"], ["leases"], ["create", "delete", "get", "patch", "update"]
            ),
            _rule(["storage.k8s.io"], ["volumeattachments"], ["get"]),
            _rule([""], ["serviceaccounts/token"], ["create"]),
            _rule(["storage.k8s.io"], ["csidrivers"], READ),
            _rule(["storage.k8s.io"], ["csinodes"], ["create", "delete", "get", "patch", "update"]),
            _rule(["node.k8s.io"], ["runtimeclasses"], READ),
        ],
    ),
    _role(
        "system:node-bootstrapper",
        [
            _rule(
                ["certificates.k8s.io"],
                ["certificatesigningrequests"],
                ["create", "get", "list", "watch"],
            )
        ],
    ),
    _role(
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        [_rule(["certificates.k8s.io"], ["certificatesigningrequests/nodeclient"], ["create"])],
    ),
    _role(
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        [_rule(["certificates.k8s.io"], ["certificatesigningrequests/selfnodeclient"], ["create"])],
    ),
    _role(
        "system:volume-scheduler",
        [
            _rule([""], ["persistentvolumes"], ["get", "list", "patch", "update", "watch"]),
            _rule(["storage.k8s.io"], ["storageclasses"], READ),
            _rule([""], ["persistentvolumeclaims"], ["get", "list", "patch", "update", "watch"]),
        ],
    ),
    _role(
        "system:persistent-volume-provisioner",
        [
            _rule([""], ["persistentvolumes"], ["create", "delete", "get", "list", "watch"]),
            _rule([""], ["persistentvolumeclaims"], ["get", "list", "update", "watch"]),
            _rule(["storage.k8s.io"], ["storageclasses"], READ),
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch", "update", "watch"]),
        ],
    ),
    _role("system:kube-aggregator", [_rule([""], ["endpoints", "services"], READ)]),
]


def _binding(name: str, role: str, *subjects: Obj) -> Obj:
    return {
        "metadata": {
            "name": name,
            "labels": dict(BOOTSTRAP_LABELS),
            "annotations": dict(AUTOUPDATE),
        },
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": list(subjects),
    }


def _group(name: str) -> Obj:
    return {"apiGroup": RBAC, "kind": "Group", "name": name}


def _user(name: str) -> Obj:
    return {"apiGroup": RBAC, "kind": "User", "name": name}


CLUSTER_ROLE_BINDINGS: list[Obj] = [
    _binding("cluster-admin", "cluster-admin", _group("system:masters")),
    _binding("kubeadm:cluster-admins", "cluster-admin", _group("kubeadm:cluster-admins")),
    _binding("system:basic-user", "system:basic-user", _group("system:authenticated")),
    _binding("system:discovery", "system:discovery", _group("system:authenticated")),
    _binding(
        "system:public-info-viewer",
        "system:public-info-viewer",
        _group("system:authenticated"),
        _group("system:unauthenticated"),
    ),
    _binding("system:monitoring", "system:monitoring", _group("system:monitoring")),
    _binding(
        "system:service-account-issuer-discovery",
        "system:service-account-issuer-discovery",
        _group("system:serviceaccounts"),
    ),
    _binding("system:kube-scheduler", "system:kube-scheduler", _user("system:kube-scheduler")),
    _binding("system:volume-scheduler", "system:volume-scheduler", _user("system:kube-scheduler")),
    _binding(
        "system:kube-controller-manager",
        "system:kube-controller-manager",
        _user("system:kube-controller-manager"),
    ),
    _binding("system:node-proxier", "system:node-proxier", _user("system:kube-proxy")),
    _binding(
        "system:kube-dns",
        "system:kube-dns",
        {"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"},
    ),
    _binding(
        "kubeadm:node-proxier",
        "system:node-proxier",
        {"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"},
    ),
    _binding(
        "kubeadm:get-nodes",
        "system:node-bootstrapper",
        _group("system:bootstrappers:kubeadm:default-node-token"),
    ),
]

PRIORITY_CLASSES: list[Obj] = [
    {
        "metadata": {"name": name},
        "value": value,
        "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority",
        "description": description,
    }
    for name, value, description in (
        (
            "system-node-critical",
            2000001000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        (
            "system-cluster-critical",
            2000000000,
            "Used for system critical pods that must run in the cluster, but can be moved to "
            "another node if necessary.",
        ),
    )
]


def _hash(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def _static_pod(component: str, command: list[str]) -> Obj:
    """A control-plane static pod as its mirror pod appears in the API."""
    digest = _hash(component)[:32]
    return {
        "metadata": {
            "name": f"{component}-{CONTROL_PLANE}",
            "labels": {"component": component, "tier": "control-plane"},
            "annotations": {
                "kubernetes.io/config.hash": digest,
                "kubernetes.io/config.mirror": digest,
                "kubernetes.io/config.seen": "2025-01-01T00:00:00.000000000Z",
                "kubernetes.io/config.source": "file",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": component,
                    "image": f"registry.k8s.io/{component}:{VERSION}"
                    if component != "etcd"
                    else "registry.k8s.io/etcd:3.5.16-0",
                    "command": command,
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
            "hostNetwork": True,
            "nodeName": CONTROL_PLANE,
            "priorityClassName": "system-node-critical",
            "priority": 2000001000,
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
        },
    }


def _coredns(suffix: str) -> Obj:
    template_hash = _hash("coredns")[:10]
    return {
        "metadata": {
            "name": f"coredns-{template_hash}-{suffix}",
            "labels": {"k8s-app": "kube-dns", "pod-template-hash": template_hash},
        },
        "spec": {
            "containers": [
                {
                    "name": "coredns",
                    "image": "registry.k8s.io/coredns/coredns:v1.11.3",
                    "args": ["-conf", "/etc/coredns/Corefile"],
                    "ports": [
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                        {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                        {"name": "metrics", "containerPort": 9153, "protocol": "TCP"},
                    ],
                    "resources": {
                        "limits": {"memory": "170Mi"},
                        "requests": {"cpu": "100m", "memory": "70Mi"},
                    },
                }
            ],
            "dnsPolicy": "Default",
            "nodeName": CONTROL_PLANE,
            "serviceAccountName": "coredns",
            "priorityClassName": "system-cluster-critical",
            "priority": 2000000000,
            "tolerations": [
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
                {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
            ],
        },
    }


def _kube_proxy() -> Obj:
    return {
        "metadata": {
            "name": f"kube-proxy-{_hash('kube-proxy')[:5]}",
            "labels": {
                "k8s-app": "kube-proxy",
                "controller-revision-hash": _hash("kube-proxy", "revision")[:10],
                "pod-template-generation": "1",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "kube-proxy",
                    "image": f"registry.k8s.io/kube-proxy:{VERSION}",
                    "command": [
                        "/usr/local/bin/kube-proxy",
                        "--config=/var/lib/kube-proxy/config.conf",
                        f"--hostname-override={CONTROL_PLANE}",
                    ],
                }
            ],
            "hostNetwork": True,
            "nodeName": CONTROL_PLANE,
            "serviceAccountName": "kube-proxy",
            "priorityClassName": "system-node-critical",
            "priority": 2000001000,
            "tolerations": [{"operator": "Exists"}],
        },
    }


def system_pods() -> list[Obj]:
    """The kube-system pods of a freshly booted cluster."""
    return [
        _static_pod("etcd", ["etcd", f"--advertise-client-urls=https://{CONTROL_PLANE_IP}:2379"]),
        _static_pod(
            "kube-apiserver",
            [
                "kube-apiserver",
                f"--advertise-address={CONTROL_PLANE_IP}",
                "--service-cluster-ip-range=10.96.0.0/12",
            ],
        ),
        _static_pod(
            "kube-controller-manager", ["kube-controller-manager", "--cluster-cidr=10.244.0.0/16"]
        ),
        _static_pod("kube-scheduler", ["kube-scheduler", "--leader-elect=true"]),
        _coredns(_hash("coredns", "a")[:5]),
        _coredns(_hash("coredns", "b")[:5]),
        _kube_proxy(),
    ]


SYSTEM_SERVICES: list[tuple[str, Obj]] = [
    (
        "default",
        {
            "metadata": {
                "name": "kubernetes",
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {
                "clusterIP": KUBERNETES_IP,
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            },
        },
    ),
    (
        "kube-system",
        {
            "metadata": {
                "name": "kube-dns",
                "labels": {
                    "k8s-app": "kube-dns",
                    "kubernetes.io/cluster-service": "true",
                    "kubernetes.io/name": "CoreDNS",
                },
                "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
            },
            "spec": {
                "clusterIP": DNS_IP,
                "selector": {"k8s-app": "kube-dns"},
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                    {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
                ],
            },
        },
    ),
]


def seed(registry: Registry) -> None:
    """Create what a booted cluster holds (each object only if it is not there yet)."""
    for group, plural, ns, bodies in (
        (RBAC, "clusterroles", "", CLUSTER_ROLES),
        (RBAC, "clusterrolebindings", "", CLUSTER_ROLE_BINDINGS),
        ("scheduling.k8s.io", "priorityclasses", "", PRIORITY_CLASSES),
        (
            "",
            "serviceaccounts",
            "kube-system",
            [{"metadata": {"name": name}} for name in ("coredns", "kube-dns", "kube-proxy")],
        ),
    ):
        for body in bodies:
            _create(registry, group, plural, ns=ns, body=body)
    for ns, service in SYSTEM_SERVICES:
        _create(registry, "", "services", ns=ns, body=service)
    _control_plane_node(registry)
    for pod in system_pods():
        _running(registry, _create(registry, "", "pods", ns="kube-system", body=pod))


def _type(registry: Registry, group: str, plural: str) -> ResourceType:
    rt = registry.catalog.preferred(group, plural)
    assert rt is not None, (group, plural)
    return rt


def _create(registry: Registry, group: str, plural: str, *, ns: str, body: Obj) -> Obj | None:
    rt = _type(registry, group, plural)
    name = body["metadata"]["name"]
    if registry.store.get(rt.key, ns, name) is not None:
        return None
    try:
        return registry.create(rt, ns=ns, body=copy.deepcopy(body))
    except ApiError:
        return None


def _control_plane_node(registry: Registry) -> None:
    node = node_object(name=CONTROL_PLANE)
    labels = node["metadata"]["labels"]
    labels["node-role.kubernetes.io/control-plane"] = ""
    labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
    node["spec"] = {
        "podCIDR": "10.244.1.0/24",
        "podCIDRs": ["10.244.1.0/24"],
        "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
    }
    created = _create(registry, "", "nodes", ns="", body=node)
    if created is None:
        return
    rt = _type(registry, "", "nodes")
    cur = registry.get(rt, ns="", name=CONTROL_PLANE)
    status = node_status(timestamp(registry.clock()), name=CONTROL_PLANE)
    status["addresses"][0]["address"] = CONTROL_PLANE_IP
    registry.commit(rt, cur=cur, new={**cur, "status": status}, subresource="status")


def _running(registry: Registry, pod: Obj | None) -> None:
    """Write the status the control-plane node's kubelet reports for a running pod."""
    if pod is None:
        return
    rt = _type(registry, "", "pods")
    meta, spec = pod["metadata"], pod["spec"]
    now = timestamp(registry.clock())
    ip = (
        CONTROL_PLANE_IP
        if spec.get("hostNetwork")
        else f"10.244.1.{2 + int(_hash(meta['name'])[:2], 16) % 250}"
    )
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for t in (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        )
    ]
    statuses = [
        {
            "name": c["name"],
            "state": {"running": {"startedAt": now}},
            "lastState": {},
            "ready": True,
            "restartCount": 0,
            "image": c["image"],
            "imageID": f"{c['image'].split(':')[0]}@sha256:{_hash(c['image'])}",
            "containerID": f"containerd://{_hash(meta['uid'], c['name'])}",
            "started": True,
        }
        for c in spec["containers"]
    ]
    status = {
        **pod.get("status", {}),
        "phase": "Running",
        "conditions": conditions,
        "hostIP": CONTROL_PLANE_IP,
        "hostIPs": [{"ip": CONTROL_PLANE_IP}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "containerStatuses": statuses,
    }
    cur = registry.get(rt, ns="kube-system", name=meta["name"])
    registry.commit(rt, cur=cur, new={**cur, "status": status}, subresource="status")
