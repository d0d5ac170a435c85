"""The generated CRDs: in sync with the models, structural, and keeping every ARC field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.api import crds
from shared.api.resources import EphemeralRunnerSet, EphemeralRunnerSetStatus, KubeObject
from shared.kube.names import LABEL_PATTERN, SUBDOMAIN_PATTERN
from tests.shared.api.conftest import load_fixture, prune, prune_object

CRD_DIR = Path(__file__).parents[3] / "manifests" / "crds"

KIND_FILES = {
    "AutoscalingRunnerSet": "actions.github.com_autoscalingrunnersets.yaml",
    "AutoscalingListener": "actions.github.com_autoscalinglisteners.yaml",
    "EphemeralRunnerSet": "actions.github.com_ephemeralrunnersets.yaml",
    "EphemeralRunner": "actions.github.com_ephemeralrunners.yaml",
}
FIXTURES = {
    "AutoscalingRunnerSet": "arc-autoscalingrunnerset.yaml",
    "AutoscalingListener": "arc-autoscalinglistener.yaml",
    "EphemeralRunnerSet": "arc-ephemeralrunnerset.yaml",
    "EphemeralRunner": "arc-ephemeralrunner.yaml",
}


def _crd(kind: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CRD_DIR / KIND_FILES[kind]).read_text())
    return data


def _version(kind: str) -> dict[str, Any]:
    (version,) = _crd(kind)["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = _version(kind)["schema"]["openAPIV3Schema"]
    return schema


def test_checked_in_crds_match_the_models() -> None:
    assert crds.stale_files(CRD_DIR) == [], "the CRDs are out of date: run scripts/gen-crds"


def test_a_model_change_makes_the_checked_in_crd_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    class ChangedStatus(EphemeralRunnerSetStatus):
        idle_ephemeral_runners: int = 0

    class ChangedSet(EphemeralRunnerSet):
        status: ChangedStatus | None = None

    ChangedSet.__name__ = "EphemeralRunnerSet"
    original: type[KubeObject] = EphemeralRunnerSet
    changed: type[KubeObject] = ChangedSet
    columns = crds.PRINTER_COLUMNS[original]
    monkeypatch.delitem(crds.PRINTER_COLUMNS, original)
    monkeypatch.setitem(crds.PRINTER_COLUMNS, changed, columns)
    assert crds.stale_files(CRD_DIR) == [KIND_FILES["EphemeralRunnerSet"]]


def test_check_mode_names_the_stale_file_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert crds.main(["--write", str(tmp_path)]) == 0
    assert crds.main(["--check", str(tmp_path)]) == 0
    stale = tmp_path / KIND_FILES["EphemeralRunner"]
    stale.write_text(stale.read_text().replace("jobDisplayName", "jobName"))
    assert crds.main(["--check", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == f"{stale} is out of date: run scripts/gen-crds"


def test_crd_kustomization_lists_every_crd() -> None:
    kustomization = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text())
    assert kustomization["resources"] == sorted(KIND_FILES.values())


@pytest.mark.parametrize("kind", KIND_FILES)
def test_crd_identity(kind: str) -> None:
    crd = _crd(kind)
    plural = f"{kind.lower()}s"
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{plural}.actions.github.com"
    assert crd["spec"]["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    assert crd["spec"]["scope"] == "Namespaced"
    version = _version(kind)
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("kind", KIND_FILES)
def test_schema_is_structural(kind: str) -> None:
    for path, node in _nodes(_schema(kind)):
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, (
            path
        )
        assert not {"anyOf", "oneOf", "allOf", "not", "$ref", "nullable"} & node.keys(), path
        if node["type"] == "array":
            assert "items" in node, path


@pytest.mark.parametrize("kind", KIND_FILES)
def test_root_metadata_is_left_to_the_api_server(kind: str) -> None:
    assert _schema(kind)["properties"]["metadata"] == {"type": "object"}


POD_SPECS = {
    "AutoscalingRunnerSet": (".spec.template.spec", ".spec.listenerTemplate.spec"),
    "AutoscalingListener": (".spec.template.spec",),
    "EphemeralRunnerSet": (".spec.ephemeralRunnerSpec.spec",),
    "EphemeralRunner": (".spec.spec",),
}


@pytest.mark.parametrize(("kind", "path"), [(k, p) for k, ps in POD_SPECS.items() for p in ps])
def test_pod_spec_preserves_unknown_fields(kind: str, path: str) -> None:
    node = dict(_nodes(_schema(kind)))[path]
    assert node["x-kubernetes-preserve-unknown-fields"] is True
    assert node["required"] == ["containers"]


@pytest.mark.parametrize("kind", KIND_FILES)
def test_only_the_pod_spec_preserves_unknown_fields(kind: str) -> None:
    preserving = [
        p for p, n in _nodes(_schema(kind)) if n.get("x-kubernetes-preserve-unknown-fields")
    ]
    assert preserving
    assert [p for p in preserving if not p.startswith(POD_SPECS[kind])] == []


@pytest.mark.parametrize("kind", KIND_FILES)
def test_printer_columns_name_existing_fields(kind: str) -> None:
    paths = {path for path, _ in _nodes(_schema(kind))}
    for column in _version(kind)["additionalPrinterColumns"]:
        if column["jsonPath"] == ".metadata.creationTimestamp":
            continue
        assert column["jsonPath"] in paths, column


@pytest.mark.parametrize("kind", ["AutoscalingRunnerSet", "EphemeralRunnerSet"])
def test_arc_columns_for_missing_fields_are_replaced(kind: str) -> None:
    names = [c["name"] for c in _version(kind)["additionalPrinterColumns"]]
    assert "Finished Runners" not in names
    assert "Deleting Runners" not in names
    assert "Failed Runners" in names


def test_generator_rejects_a_column_for_a_missing_field(monkeypatch: pytest.MonkeyPatch) -> None:
    kind: type[KubeObject] = EphemeralRunnerSet
    bad = {"name": "X", "type": "integer", "jsonPath": ".status.nope"}
    monkeypatch.setitem(crds.PRINTER_COLUMNS, kind, [*crds.PRINTER_COLUMNS[kind], bad])
    with pytest.raises(ValueError, match="printer column 'X' names no field"):
        crds.render()


@pytest.mark.parametrize(
    ("kind", "path", "required"),
    [
        ("EphemeralRunnerSet", ".spec", ["ephemeralRunnerSpec", "patchID"]),
        ("EphemeralRunnerSet", ".status", ["currentReplicas"]),
        (
            "EphemeralRunnerSet",
            ".spec.ephemeralRunnerSpec",
            ["githubConfigSecret", "githubConfigUrl", "runnerScaleSetId"],
        ),
        ("EphemeralRunner", ".spec", ["githubConfigSecret", "githubConfigUrl", "runnerScaleSetId"]),
        ("AutoscalingRunnerSet", ".spec.githubServerTLS.certificateFrom.configMapKeyRef", ["key"]),
        (
            "AutoscalingRunnerSet",
            ".spec.vaultConfig.azureKeyVault",
            ["certificatePath", "clientId", "tenantId", "url"],
        ),
        ("AutoscalingRunnerSet", ".spec.listenerMetrics.histograms{}", ["labels"]),
    ],
)
def test_required_fields_follow_arc(kind: str, path: str, required: list[str]) -> None:
    assert dict(_nodes(_schema(kind)))[path]["required"] == required


OBJECT_NAME = {"maxLength": 253, "pattern": SUBDOMAIN_PATTERN}
NAMESPACE_NAME = {"maxLength": 63, "pattern": LABEL_PATTERN}


@pytest.mark.parametrize(
    ("kind", "path", "expected"),
    [
        ("AutoscalingRunnerSet", ".spec.minRunners", {"minimum": 0}),
        ("AutoscalingRunnerSet", ".spec.maxRunners", {"minimum": 0}),
        ("AutoscalingListener", ".spec.maxRunners", {"minimum": 0}),
        ("EphemeralRunner", ".status.jobRequestId", {"format": "int64"}),
        ("EphemeralRunner", ".status.workflowRunId", {"format": "int64"}),
        ("EphemeralRunner", ".status.failures{}", {"format": "date-time"}),
        ("EphemeralRunnerSet", ".spec.actionableRevision", {"format": "int64"}),
        ("EphemeralRunnerSet", ".status.appliedActionableRevision", {"format": "int64"}),
        (
            "EphemeralRunner",
            ".status.phase",
            {"enum": ["Pending", "Running", "Succeeded", "Failed", "Outdated"]},
        ),
        ("EphemeralRunnerSet", ".status.phase", {"enum": ["Running", "Outdated"]}),
        ("AutoscalingRunnerSet", ".status.phase", {"enum": ["Pending", "Running", "Outdated"]}),
        ("AutoscalingRunnerSet", ".spec.githubConfigSecret", OBJECT_NAME),
        ("AutoscalingRunnerSet", ".spec.proxy.http.credentialSecretRef", OBJECT_NAME),
        ("AutoscalingRunnerSet", ".spec.proxy.https.credentialSecretRef", OBJECT_NAME),
        (
            "AutoscalingRunnerSet",
            ".spec.githubServerTLS.certificateFrom.configMapKeyRef.name",
            OBJECT_NAME,
        ),
        ("AutoscalingListener", ".spec.githubConfigSecret", OBJECT_NAME),
        ("AutoscalingListener", ".spec.autoscalingRunnerSetNamespace", NAMESPACE_NAME),
        ("AutoscalingListener", ".spec.autoscalingRunnerSetName", OBJECT_NAME),
        ("AutoscalingListener", ".spec.ephemeralRunnerSetName", OBJECT_NAME),
        ("EphemeralRunnerSet", ".spec.ephemeralRunnerSpec.githubConfigSecret", OBJECT_NAME),
        ("EphemeralRunnerSet", ".spec.ephemeralRunnerSpec.proxySecretRef", OBJECT_NAME),
        ("EphemeralRunner", ".spec.githubConfigSecret", OBJECT_NAME),
        ("EphemeralRunner", ".spec.proxy.https.credentialSecretRef", OBJECT_NAME),
    ],
)
def test_field_constraints(kind: str, path: str, expected: dict[str, Any]) -> None:
    node = dict(_nodes(_schema(kind)))[path]
    assert {key: node.get(key) for key in expected} == expected


@pytest.mark.parametrize("kind", KIND_FILES)
def test_api_server_pruning_keeps_every_field_of_an_arc_object(kind: str) -> None:
    raw = load_fixture(FIXTURES[kind])
    assert prune_object(raw, _schema(kind)) == raw


def test_pruning_drops_a_misspelt_field() -> None:
    raw = load_fixture(FIXTURES["AutoscalingRunnerSet"])
    raw["spec"]["minRunner"] = 1
    assert "minRunner" not in prune(raw, _schema("AutoscalingRunnerSet"))["spec"]
