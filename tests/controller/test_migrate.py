"""`gha-controller migrate-from-arc` on the objects ARC's Helm charts and controller leave behind
(tests/controller/arc_helm/objects.yaml), run as the installed command against the emulator."""

from __future__ import annotations

import asyncio
import copy
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from shared.kube.errors import NotFound
from shared.kube.objects import POD, ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT, Kind, Objects
from shared.typedefs import JSONDict

ROOT = Path(__file__).resolve().parents[2]
GHA_CONTROLLER = ROOT / ".venv" / "bin" / "gha-controller"
FIXTURE = Path(__file__).parent / "arc_helm" / "objects.yaml"
LISTENER = "arc-runner-set-754b578d-listener"
RUNNER_SET = "arc-runner-set-m8qrz"
"""Released ARC's generated name (`<set>-xxxxx`)."""
RUNNER = f"{RUNNER_SET}-runner-x7k2p"
HELM_OBJECTS = [
    (ROLE_BINDING, "arc-runner-set-gha-rs-kube-mode"),
    (ROLE, "arc-runner-set-gha-rs-kube-mode"),
    (SERVICE_ACCOUNT, "arc-runner-set-gha-rs-kube-mode"),
    (SECRET, "arc-runner-set-gha-rs-github-secret"),
    (ROLE_BINDING, "arc-runner-set-gha-rs-manager"),
    (ROLE, "arc-runner-set-gha-rs-manager"),
]
RUNNERS_NEED = HELM_OBJECTS[:4]
"""What the runner pods and their registration use: kept when Helm goes."""

PLAN = [
    "remove finalizer autoscalinglistener.actions.github.com/finalizer from "
    f"autoscalinglistener arc-systems/{LISTENER}",
    f"delete autoscalinglistener arc-systems/{LISTENER}",
    f"delete rolebinding arc-runners/{LISTENER}",
    f"delete role arc-runners/{LISTENER}",
    f"delete pod arc-systems/{LISTENER}",
    f"wait until pod arc-systems/{LISTENER} is gone",
    *(
        f"remove finalizer actions.github.com/cleanup-protection from "
        f"{kind.kind.lower()} arc-runners/{name}"
        + (
            f"\nannotate {kind.kind.lower()} arc-runners/{name} helm.sh/resource-policy=keep"
            if (kind, name) in RUNNERS_NEED
            else ""
        )
        for kind, name in HELM_OBJECTS
    ),
    "remove the owner reference to autoscalingrunnerset arc-runners/arc-runner-set from "
    f"ephemeralrunnerset arc-runners/{RUNNER_SET}",
    "remove finalizer autoscalingrunnerset.actions.github.com/finalizer from "
    "autoscalingrunnerset arc-runners/arc-runner-set",
]
"""ARC's listener first (its session is released before anything else moves), then the Helm
objects in the order ARC's own cleanup uses, the runner set kept, the scale set last."""


def _plan_lines() -> list[str]:
    return "\n".join(PLAN).splitlines()


def _seed(kube: KubeEmulator) -> None:
    """Create the fixture's objects in order, pointing each ownerReference at the uid of the
    object of that kind and name created before it in the same namespace."""
    kube.apply_crds(project_crds())
    uids: dict[tuple[str, str, str], str] = {}
    for doc in yaml.safe_load_all(FIXTURE.read_text()):
        if not doc:
            continue
        body = copy.deepcopy(doc)
        meta = body["metadata"]
        for ref in meta.get("ownerReferences") or []:
            ref["uid"] = uids[(ref["kind"], meta.get("namespace", ""), ref["name"])]
        created = kube.apply(body)
        uids[(body["kind"], meta.get("namespace", ""), meta["name"])] = created["metadata"]["uid"]


async def _migrate(kubeconfig: Path, *args: str) -> tuple[int, list[str], str]:
    """As the README runs it: `gha-controller migrate-from-arc [--apply]` with KUBECONFIG."""
    process = await asyncio.create_subprocess_exec(
        str(GHA_CONTROLLER),
        "migrate-from-arc",
        *args,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines(), err.decode()


async def _get(objects: Objects, kind: Kind, namespace: str, name: str) -> JSONDict | None:
    try:
        return await objects.get(kind, namespace, name)
    except NotFound:
        return None


async def _versions(objects: Objects) -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for kind in (
        AUTOSCALING_LISTENER,
        AUTOSCALING_RUNNER_SET,
        EPHEMERAL_RUNNER_SET,
        EPHEMERAL_RUNNER,
        POD,
        ROLE,
        ROLE_BINDING,
        SECRET,
        SERVICE_ACCOUNT,
    ):
        for obj in (await objects.list(kind, None))["items"]:
            meta = obj["metadata"]
            found[(kind.kind, f"{meta['namespace']}/{meta['name']}")] = meta["resourceVersion"]
    return found


@pytest.fixture
def kubeconfig(kube: KubeEmulator, tmp_path: Path) -> Path:
    _seed(kube)
    path = tmp_path / "kubeconfig"
    kube.write_kubeconfig(path)
    return path


async def test_dry_run_prints_the_plan_and_changes_nothing(
    kubeconfig: Path, objects: Objects
) -> None:
    before = await _versions(objects)
    code, out, err = await _migrate(kubeconfig)
    assert (code, err) == (0, "")
    assert out == [
        *(f"would {line}" for line in _plan_lines()),
        "dry run: nothing changed; run again with --apply to make these changes",
    ]
    assert await _versions(objects) == before


async def test_apply_releases_arcs_objects_and_keeps_the_runners(
    kubeconfig: Path, objects: Objects
) -> None:
    code, out, err = await _migrate(kubeconfig, "--apply")
    assert (code, err) == (0, "")
    assert out == _plan_lines()

    # ARC's listener and what its finalizer would have deleted are gone: no session held.
    assert await _get(objects, AUTOSCALING_LISTENER, "arc-systems", LISTENER) is None
    assert await _get(objects, POD, "arc-systems", LISTENER) is None
    assert await _get(objects, ROLE, "arc-runners", LISTENER) is None
    assert await _get(objects, ROLE_BINDING, "arc-runners", LISTENER) is None

    # Nothing of ARC's finalizers is left on the scale set or the Helm objects.
    scale_set = await objects.get(AUTOSCALING_RUNNER_SET, "arc-runners", "arc-runner-set")
    assert not scale_set["metadata"].get("finalizers")
    for kind, name in HELM_OBJECTS:
        helm_object = await objects.get(kind, "arc-runners", name)
        assert not helm_object["metadata"].get("finalizers"), (kind, name)
    for kind, name in HELM_OBJECTS:
        annotations = (await objects.get(kind, "arc-runners", name))["metadata"]["annotations"]
        kept = annotations.get("helm.sh/resource-policy") == "keep"
        assert kept == ((kind, name) in RUNNERS_NEED), (kind, name)

    # The runner set and its runner are untouched but for the owner reference to the scale set.
    runner_set = await objects.get(EPHEMERAL_RUNNER_SET, "arc-runners", RUNNER_SET)
    assert runner_set["metadata"]["finalizers"] == ["ephemeralrunner.actions.github.com/finalizer"]
    assert not runner_set["metadata"].get("ownerReferences")
    assert runner_set["spec"]["replicas"] == 1
    runner = await objects.get(EPHEMERAL_RUNNER, "arc-runners", RUNNER)
    assert runner["metadata"]["finalizers"] == [
        "ephemeralrunner.actions.github.com/finalizer",
        "ephemeralrunner.actions.github.com/runner-registration-finalizer",
    ]
    assert runner["metadata"]["ownerReferences"][0]["uid"] == runner_set["metadata"]["uid"]

    # What `helm uninstall` of the scale set does next: delete its objects but those marked
    # keep. Nothing is stuck; the runner set, its runner and what they use stay.
    removed = [(AUTOSCALING_RUNNER_SET, "arc-runner-set"), *HELM_OBJECTS[4:]]
    for kind, name in removed:
        await objects.delete(kind, "arc-runners", name)
    for kind, name in removed:
        assert await _get(objects, kind, "arc-runners", name) is None, (kind, name)
    code, out, _ = await _migrate(kubeconfig, "--apply")
    assert (code, out) == (0, ["nothing of ARC's to migrate"])
    assert await _get(objects, EPHEMERAL_RUNNER_SET, "arc-runners", RUNNER_SET)
    assert await _get(objects, EPHEMERAL_RUNNER, "arc-runners", RUNNER)
    for kind, name in RUNNERS_NEED:
        assert await _get(objects, kind, "arc-runners", name), (kind, name)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--timeout", "0"], "--timeout must be positive"),
        (["--kubeconfig", "/does/not/exist"], "--kubeconfig /does/not/exist is not a file"),
        (["--force"], "unrecognized arguments: --force"),
        (["--back", "--keep-helm-release"], "--back and --keep-helm-release do not go together"),
    ],
)
async def test_a_bad_argument_exits_2_with_one_line(
    kubeconfig: Path, args: list[str], says: str
) -> None:
    code, out, err = await _migrate(kubeconfig, *args)
    assert (code, out) == (2, [])
    assert err.startswith("gha-controller migrate-from-arc: ")
    assert err.count("\n") == 1
    assert says in err


async def test_keep_helm_release_removes_only_arcs_listeners(
    kube: KubeEmulator, kubeconfig: Path, objects: Objects
) -> None:
    """The way over that keeps ARC's Helm release (docs/install.md#keeping-arcs-helm-release):
    ARC's listener goes with its pod, Role and RoleBinding, so its session is released; the set,
    its finalizer, its runner set (owner reference kept: this controller adopts it) and the Helm
    objects stay; a listener in this controller's namespace is its own and stays."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "gha-runner-scaler-system"}})  # fmt: skip
    ours = copy.deepcopy(await objects.get(AUTOSCALING_LISTENER, "arc-systems", LISTENER))
    ours["metadata"] = {"name": LISTENER, "namespace": "gha-runner-scaler-system"}
    kube.apply(ours)
    before = await _versions(objects)
    code, out, err = await _migrate(kubeconfig, "--keep-helm-release", "--apply")
    assert (code, err) == (0, "")
    assert out == PLAN[:6]
    assert await _get(objects, AUTOSCALING_LISTENER, "arc-systems", LISTENER) is None
    assert await _get(objects, POD, "arc-systems", LISTENER) is None
    assert await _get(objects, AUTOSCALING_LISTENER, "gha-runner-scaler-system", LISTENER)
    after = await _versions(objects)
    for key in (("AutoscalingRunnerSet", "arc-runners/arc-runner-set"),
                ("EphemeralRunnerSet", f"arc-runners/{RUNNER_SET}"),
                ("EphemeralRunner", f"arc-runners/{RUNNER}"),
                *((kind.kind, f"arc-runners/{name}") for kind, name in HELM_OBJECTS)):  # fmt: skip
        assert after[key] == before[key], key


async def test_back_leaves_arcs_listener_and_takes_only_its_own_finalizer_off_a_deleted_set(
    kubeconfig: Path, objects: Objects
) -> None:
    """`--back` (docs/install.md#going-back-to-arc) on a runner set being deleted already: a new
    finalizer may not be added then, so this controller's goes and ARC's stays for ARC. A
    listener in ARC's namespace is ARC's, and stays."""
    ours = "ephemeralrunnerset.actions.github.com/finalizer"
    arcs = "ephemeralrunner.actions.github.com/finalizer"
    await objects.patch(EPHEMERAL_RUNNER_SET, "arc-runners", RUNNER_SET,
                        {"metadata": {"finalizers": [arcs, ours]}})  # fmt: skip
    await objects.delete(EPHEMERAL_RUNNER_SET, "arc-runners", RUNNER_SET)
    listener = await objects.get(AUTOSCALING_LISTENER, "arc-systems", LISTENER)
    code, out, err = await _migrate(kubeconfig, "--back", "--apply")
    assert (code, err) == (0, "")
    assert out == [f"remove finalizer {ours} from ephemeralrunnerset arc-runners/{RUNNER_SET}"]
    runner_set = await objects.get(EPHEMERAL_RUNNER_SET, "arc-runners", RUNNER_SET)
    assert runner_set["metadata"]["finalizers"] == [arcs]
    after = await objects.get(AUTOSCALING_LISTENER, "arc-systems", LISTENER)
    assert after["metadata"]["resourceVersion"] == listener["metadata"]["resourceVersion"]


async def test_back_refuses_while_this_controller_holds_its_lease(
    kube: KubeEmulator, kubeconfig: Path, objects: Objects
) -> None:
    """Step 1 of docs/install.md#going-back-to-arc skipped: a running controller would put its
    finalizer back and make its listeners again, so `--back` changes nothing and says why."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "gha-runner-scaler-system"}})  # fmt: skip
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kube.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "gha-runner-scale-set-controller",
                             "namespace": "gha-runner-scaler-system"},
                "spec": {"holderIdentity": "gha-controller-7d9f", "leaseDurationSeconds": 15,
                         "renewTime": now}})  # fmt: skip
    before = await _versions(objects)
    code, out, err = await _migrate(kubeconfig, "--back", "--apply")
    assert (code, out) == (1, [])
    assert err == (
        "gha-controller migrate-from-arc: this controller is running: gha-controller-7d9f holds "
        "the Lease gha-runner-scaler-system/gha-runner-scale-set-controller; stop it first "
        "(docs/install.md#going-back-to-arc, step 1)\n"
    )
    assert await _versions(objects) == before
