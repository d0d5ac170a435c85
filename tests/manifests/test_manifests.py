"""The manifests as kubectl renders them: what is installed, how it runs, and its exact RBAC."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.autoscalinglistener.objects import listener_pod, role_rules
from controller.autoscalingrunnerset.objects import listener_labels
from controller.settings import InClusterSettings, RunnerSettings
from shared.api import parse_resource
from tests.manifests.conftest import kustomize
from tests.shared.api.conftest import prune_object

ROOT = Path(__file__).parents[2]
MANIFESTS = ROOT / "manifests"
NAMESPACE = "gha-runner-scaler-system"

Rules = set[tuple[str, str, frozenset[str], tuple[str, ...]]]


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _rules(role: dict[str, Any]) -> Rules:
    return {
        (group, resource, frozenset(rule["verbs"]), tuple(rule.get("resourceNames", ())))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    pod = _one(objects, "Deployment", "gha-controller")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert isinstance(container, dict)
    return container


def test_default_install_is_the_controller_and_the_crds(install: list[dict[str, Any]]) -> None:
    assert sorted((o["kind"], o["metadata"]["name"]) for o in install) == [
        ("ClusterRole", "gha-controller"),
        ("ClusterRole", "gha-controller-runner-namespace"),
        ("ClusterRoleBinding", "gha-controller"),
        ("CustomResourceDefinition", "autoscalinglisteners.actions.github.com"),
        ("CustomResourceDefinition", "autoscalingrunnersets.actions.github.com"),
        ("CustomResourceDefinition", "ephemeralrunners.actions.github.com"),
        ("CustomResourceDefinition", "ephemeralrunnersets.actions.github.com"),
        ("Deployment", "gha-controller"),
        ("Namespace", NAMESPACE),
        ("Role", "gha-controller"),
        ("Role", "gha-controller-leader-election"),
        ("RoleBinding", "gha-controller"),
        ("RoleBinding", "gha-controller-leader-election"),
        ("ServiceAccount", "gha-controller"),
        # What RBAC cannot bound (docs/security.md#identities).
        ("ValidatingAdmissionPolicy", "gha-controller-listener-role-bindings"),
        ("ValidatingAdmissionPolicy", "gha-controller-listener-roles"),
        ("ValidatingAdmissionPolicy", "gha-controller-no-token-secrets"),
        ("ValidatingAdmissionPolicy", "gha-listener-scales-only"),
        ("ValidatingAdmissionPolicyBinding", "gha-controller-listener-role-bindings"),
        ("ValidatingAdmissionPolicyBinding", "gha-controller-listener-roles"),
        ("ValidatingAdmissionPolicyBinding", "gha-controller-no-token-secrets"),
        ("ValidatingAdmissionPolicyBinding", "gha-listener-scales-only"),
    ]


def test_namespaced_objects_are_in_the_controller_namespace(install: list[dict[str, Any]]) -> None:
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for obj in install:
        if obj["kind"] not in cluster_scoped:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]


def test_installed_crds_are_the_generated_ones(install: list[dict[str, Any]]) -> None:
    generated = [
        yaml.safe_load(p.read_text()) for p in sorted((MANIFESTS / "crds").glob("actions*.yaml"))
    ]
    installed = [o for o in install if o["kind"] == "CustomResourceDefinition"]
    assert sorted(installed, key=lambda o: o["metadata"]["name"]) == generated


def test_controller_runs_two_replicas_of_gha_controller(install: list[dict[str, Any]]) -> None:
    deployment = _one(install, "Deployment", "gha-controller")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "gha-controller"
    assert _container(install)["command"] == ["gha-controller"]


def test_listener_image_follows_the_controller_image(install: list[dict[str, Any]]) -> None:
    container = _container(install)
    env = {e["name"]: e for e in container["env"]}
    assert env["CONTROLLER_MANAGER_CONTAINER_IMAGE"]["value"] == container["image"]
    assert container["image"] == "gha-runner-scaler:0.1.0"


@pytest.mark.parametrize(
    "variable", ["GHA_CONTROLLER_LEASE_NAMESPACE", "CONTROLLER_MANAGER_POD_NAMESPACE"]
)
def test_namespace_comes_from_the_downward_api(
    install: list[dict[str, Any]], variable: str
) -> None:
    env = {e["name"]: e for e in _container(install)["env"]}
    assert env[variable]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_pod_security(install: list[dict[str, Any]]) -> None:
    pod = _one(install, "Deployment", "gha-controller")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = _container(install)["securityContext"]
    assert context == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_requests_and_limits(install: list[dict[str, Any]]) -> None:
    resources = _container(install)["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"cpu", "memory"}


def test_probes_and_ports(install: list[dict[str, Any]]) -> None:
    container = _container(install)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


ARC_KINDS = (
    "autoscalingrunnersets",
    "autoscalinglisteners",
    "ephemeralrunnersets",
    "ephemeralrunners",
)

CLUSTER_RULES: Rules = {
    *(("actions.github.com", r, frozenset({"list", "watch"}), ()) for r in ARC_KINDS),
    ("", "pods", frozenset({"list", "watch"}), ()),
    ("policy", "poddisruptionbudgets", frozenset({"list", "watch"}), ()),
}
"""Cluster-wide, only what the informers list and watch: no Secret, no write."""

RUNNER_NAMESPACE_RULES: Rules = {
    ("actions.github.com", "autoscalingrunnersets", frozenset({"list", "watch", "patch"}), ()),
    ("actions.github.com", "autoscalinglisteners", frozenset({"list", "watch"}), ()),
    (
        "actions.github.com",
        "ephemeralrunnersets",
        frozenset({"list", "watch", "create", "patch", "delete"}),
        (),
    ),
    (
        "actions.github.com",
        "ephemeralrunners",
        frozenset({"get", "list", "watch", "create", "patch", "delete"}),
        (),
    ),
    ("actions.github.com", "autoscalingrunnersets/status", frozenset({"patch"}), ()),
    ("actions.github.com", "ephemeralrunnersets/status", frozenset({"patch"}), ()),
    ("actions.github.com", "ephemeralrunners/status", frozenset({"patch"}), ()),
    *(
        ("actions.github.com", f"{r}/finalizers", frozenset({"update"}), ())
        for r in ("autoscalingrunnersets", "ephemeralrunnersets", "ephemeralrunners")
    ),
    ("", "pods", frozenset({"list", "watch", "create", "patch", "delete"}), ()),
    ("policy", "poddisruptionbudgets", frozenset({"list", "watch", "create", "patch"}), ()),
    ("", "secrets", frozenset({"get", "list", "create", "update", "patch", "delete"}), ()),
    ("", "serviceaccounts", frozenset({"get", "patch"}), ()),
    *(
        ("rbac.authorization.k8s.io", r, frozenset({"get", "create", "patch", "delete"}), ())
        for r in ("roles", "rolebindings")
    ),
    ("", "configmaps", frozenset({"get"}), ()),
    ("", "events", frozenset({"create"}), ()),
    ("coordination.k8s.io", "leases", frozenset({"get", "create", "update", "delete"}), ()),
}
"""What the reconcilers do in a runner namespace (the runner-namespace component)."""

CONTROLLER_NAMESPACE_RULES: Rules = {
    (
        "actions.github.com",
        "autoscalinglisteners",
        frozenset({"list", "watch", "create", "patch", "delete"}),
        (),
    ),
    ("actions.github.com", "autoscalinglisteners/finalizers", frozenset({"update"}), ()),
    *(
        ("actions.github.com", r, frozenset({"list", "watch"}), ())
        for r in ("autoscalingrunnersets", "ephemeralrunnersets", "ephemeralrunners")
    ),
    ("", "pods", frozenset({"list", "watch", "create", "delete"}), ()),
    ("policy", "poddisruptionbudgets", frozenset({"list", "watch"}), ()),
    ("", "serviceaccounts", frozenset({"get", "create", "patch", "delete"}), ()),
    ("", "secrets", frozenset({"get", "create", "patch", "delete"}), ()),
    ("", "events", frozenset({"create"}), ()),
}
"""The listeners, their pods, ServiceAccounts and config Secrets, in the controller namespace."""


@pytest.fixture(scope="module")
def runner_namespace() -> list[dict[str, Any]]:
    return kustomize(MANIFESTS / "examples" / "runner-namespace")


def test_controller_cluster_role_is_exact(install: list[dict[str, Any]]) -> None:
    assert _rules(_one(install, "ClusterRole", "gha-controller")) == CLUSTER_RULES


def test_cluster_role_reads_no_secret_and_writes_nothing(install: list[dict[str, Any]]) -> None:
    for _, resource, verbs, _ in _rules(_one(install, "ClusterRole", "gha-controller")):
        assert resource != "secrets"
        assert verbs <= {"list", "watch"}, resource


def test_runner_namespace_role_is_exact(install: list[dict[str, Any]]) -> None:
    rules = _one(install, "ClusterRole", "gha-controller-runner-namespace")
    assert _rules(rules) == RUNNER_NAMESPACE_RULES


def test_runner_namespace_component_binds_the_controller_in_the_runner_namespace(
    runner_namespace: list[dict[str, Any]], docker_run: list[dict[str, Any]]
) -> None:
    # Only a binding: a Role of the namespace and its binding could not both be kept until the
    # runners are gone when the namespace is deleted (docs/install.md#deleting-a-runner-namespace).
    assert sorted((o["kind"], o["metadata"]["name"]) for o in runner_namespace) == [
        ("RoleBinding", "gha-controller"),
    ]
    for objects in (runner_namespace, docker_run):
        binding = _one(objects, "RoleBinding", "gha-controller")
        assert binding["metadata"]["namespace"] == "arc-runners"
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "gha-controller-runner-namespace",
        }
        # The subject keeps the controller's namespace through the namespace transformer.
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "gha-controller", "namespace": NAMESPACE}
        ]


def test_controller_namespace_role_is_exact(install: list[dict[str, Any]]) -> None:
    assert _rules(_one(install, "Role", "gha-controller")) == CONTROLLER_NAMESPACE_RULES


def test_leader_election_role_is_exact(install: list[dict[str, Any]]) -> None:
    role = _one(install, "Role", "gha-controller-leader-election")
    assert _rules(role) == {
        ("coordination.k8s.io", "leases", frozenset({"get", "create", "update"}), ())
    }


@pytest.mark.parametrize(
    ("kind", "name", "role_kind", "role"),
    [
        ("ClusterRoleBinding", "gha-controller", "ClusterRole", "gha-controller"),
        ("RoleBinding", "gha-controller", "Role", "gha-controller"),
        ("RoleBinding", "gha-controller-leader-election", "Role", "gha-controller-leader-election"),
    ],
)
def test_controller_bindings(
    install: list[dict[str, Any]], kind: str, name: str, role_kind: str, role: str
) -> None:
    binding = _one(install, kind, name)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": role,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gha-controller", "namespace": NAMESPACE}
    ]


def test_no_wildcards_anywhere(
    install: list[dict[str, Any]],
    docker_run: list[dict[str, Any]],
    runner_namespace: list[dict[str, Any]],
) -> None:
    everything = install + docker_run + runner_namespace
    for role in [o for o in everything if o["kind"] in {"Role", "ClusterRole"}]:
        for group, resource, verbs, _ in _rules(role):
            assert "*" not in {group, resource, *verbs}, role["metadata"]["name"]


def _readme_table() -> dict[str, Rules]:
    """The README's RBAC table by its "Where" column."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Install on a cluster", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, Rules] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in {"Where", "---"}:
            continue
        group = "" if cells[1] == "core" else cells[1].strip("`")
        verbs = frozenset(v.strip() for v in cells[3].split(","))
        for resource in re.findall(r"`([^`]+)`", cells[2]):
            rows.setdefault(cells[0], set()).add((group, resource, verbs, ()))
    return rows


def test_readme_table_matches_the_controller_rbac(install: list[dict[str, Any]]) -> None:
    assert _readme_table() == {
        "cluster": _rules(_one(install, "ClusterRole", "gha-controller")),
        "runner namespace": _rules(_one(install, "ClusterRole", "gha-controller-runner-namespace")),
        "controller namespace": _rules(_one(install, "Role", "gha-controller"))
        | _rules(_one(install, "Role", "gha-controller-leader-election")),
        "cluster, with `--metrics-auth`": _rules(
            _one(
                list(yaml.safe_load_all(METRICS_AUTH_RBAC.read_text())), "ClusterRole", METRICS_AUTH
            )
        ),
    }


METRICS_AUTH = "gha-controller-metrics-auth"
"""The ClusterRole of the component manifests/metrics-auth/ (docs/security.md#metrics)."""
METRICS_AUTH_RBAC = ROOT / "manifests" / "metrics-auth" / "rbac.yaml"


def test_controller_holds_every_permission_it_grants_a_listener(
    install: list[dict[str, Any]],
) -> None:
    """RBAC escalation prevention: the controller makes each listener's Role in the runner
    namespace without `escalate` or `bind`, so what it is bound to there must hold every rule,
    the standby listeners' rule on their Lease included."""
    held = _rules(_one(install, "ClusterRole", "gha-controller-runner-namespace"))
    granted = _rules({"rules": role_rules("my-runners", leases=["my-runners-listener"])})
    assert ("coordination.k8s.io", "leases") in {(g, r) for g, r, _, _ in granted}
    for group, resource, verbs, _ in granted:
        have = set().union(*(v for g, r, v, _ in held if (g, r) == (group, resource)))
        assert verbs <= have, (resource, verbs, have)


LISTENER_RULES: Rules = {
    ("actions.github.com", "ephemeralrunners", frozenset({"get"}), ()),
    ("actions.github.com", "ephemeralrunners/status", frozenset({"patch"}), ()),
    ("actions.github.com", "ephemeralrunnersets", frozenset({"patch"}), ("my-runners",)),
}


def test_listener_rbac_is_not_in_the_default_install(install: list[dict[str, Any]]) -> None:
    assert not [o for o in install if o["metadata"]["name"] == "gha-listener"]


def test_listener_role_is_exact(docker_run: list[dict[str, Any]]) -> None:
    assert _rules(_one(docker_run, "Role", "gha-listener")) == LISTENER_RULES


def test_listener_binding_grants_the_role_to_its_service_account(
    docker_run: list[dict[str, Any]],
) -> None:
    account = _one(docker_run, "ServiceAccount", "gha-listener")
    binding = _one(docker_run, "RoleBinding", "gha-listener")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "gha-listener",
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "gha-listener",
            "namespace": account["metadata"]["namespace"],
        }
    ]
    assert binding["metadata"]["namespace"] == account["metadata"]["namespace"]


def test_kubectl_apply_f_of_the_listener_directory_reads_only_the_rbac() -> None:
    # `kubectl apply -f manifests/listener/` takes .yaml, .yml and .json files only.
    readable = sorted(
        p.name for p in (MANIFESTS / "listener").iterdir() if p.suffix in {".yaml", ".yml", ".json"}
    )
    assert readable == ["rbac.yaml"]


def _examples() -> list[Path]:
    return sorted((MANIFESTS / "examples").rglob("*.yaml"))


def _custom_resources(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return [d for d in docs if d.get("apiVersion") == "actions.github.com/v1alpha1"]


@pytest.mark.parametrize("path", _examples(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_example_custom_resources_load_and_survive_the_crd(path: Path) -> None:
    for obj in _custom_resources(path):
        assert parse_resource(obj).to_wire() == obj
        crd = yaml.safe_load(
            (MANIFESTS / "crds" / f"actions.github.com_{obj['kind'].lower()}s.yaml").read_text()
        )
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert prune_object(obj, schema) == obj


def test_examples_cover_both_ways_of_running() -> None:
    kinds = {obj["kind"] for path in _examples() for obj in _custom_resources(path)}
    assert kinds == {"AutoscalingRunnerSet", "EphemeralRunnerSet"}


def test_the_metrics_network_policies_admit_the_default_ports(
    install: list[dict[str, Any]],
) -> None:
    """The example's NetworkPolicies open the ports the controller and its listeners serve on by
    default (the listeners moved to 8090, off the controller's 8080: a stale port here would
    leave the listeners unscrapeable)."""
    policies = {
        p["metadata"]["name"]: p
        for p in yaml.safe_load_all(
            (ROOT / "manifests/examples/metrics-auth/networkpolicy.yaml").read_text()
        )
    }

    def port(name: str) -> int:
        return int(policies[name]["spec"]["ingress"][0]["ports"][0]["port"])

    listener = InClusterSettings().listener(RunnerSettings()).metrics_addr
    assert port("gha-listener-metrics") == int(listener.rsplit(":", 1)[1])
    container = _container(install)
    metrics = next(p for p in container["ports"] if p["name"] == "metrics")
    assert port("gha-controller-metrics") == metrics["containerPort"]


def test_the_podmonitors_of_the_metrics_docs_select_both_processes(
    install: list[dict[str, Any]],
) -> None:
    """docs/metrics.md's PodMonitors for authenticated scrapes: each selects, in the controller's
    namespace, the pods whose labels it matches, on a port they name; the scrape identity lives
    in the monitoring namespace, outside the group manifests/metrics-auth/ lets ask reviews."""
    section = (ROOT / "docs" / "metrics.md").read_text().split("## Authenticated scrapes", 1)[1]
    block = textwrap.dedent(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    docs = list(yaml.safe_load_all(block))
    assert {d["metadata"]["namespace"] for d in docs} == {"monitoring"}
    ars = {"metadata": {"name": "s", "namespace": "runners"}, "spec": {}}
    listener = {
        "metadata": {
            "name": "l",
            "namespace": NAMESPACE,
            "uid": "u",
            "labels": listener_labels(ars, excluded_prefixes=()),
        },
        "spec": {"image": "gha-runner-scaler:test"},
    }
    pods = {
        "gha-controller": _one(install, "Deployment", "gha-controller")["spec"]["template"],
        "gha-listeners": listener_pod(
            listener,
            config_digest="d",
            metrics_addr=InClusterSettings().listener(RunnerSettings()).metrics_addr,
        ),
    }
    monitors = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "PodMonitor"}
    assert monitors.keys() == pods.keys()
    for name, monitor in monitors.items():
        pod = pods[name]
        assert monitor["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        assert monitor["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert {e["port"] for e in monitor["podMetricsEndpoints"]} <= ports, name


ARC_CONTROLLER_POD_MONITOR = {
    "app.kubernetes.io/part-of": "gha-rs-controller",
    "app.kubernetes.io/component": "controller-manager",
}
"""The labels ARC 0.14.2's chart gives its controller pod, which PodMonitors written for ARC
select (docs/metrics.md#the-controller-pods-labels)."""


def test_the_controller_pod_carries_the_labels_arcs_pod_monitors_select(
    install: list[dict[str, Any]],
) -> None:
    deployment = _one(install, "Deployment", "gha-controller")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert ARC_CONTROLLER_POD_MONITOR.items() <= labels.items()
    # The selector of an existing Deployment is immutable: it stays ours, and still matches.
    assert deployment["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": "gha-controller"}
    }
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert "metrics" in {port["name"] for port in _container(install)["ports"]}
