"""`gha-sandbox up` and `gha-sandbox job add` as a user runs them: kubectl against the admin
kubeconfig, jobs added from another process, SIGTERM at the end, and nothing left behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import pytest
from kubernetes_asyncio import client

from sandbox.demo.cluster import CONTROLLER_NAMESPACE, CONTROLLER_USER, NAMESPACE, SCALE_SET
from shared.api.names import LABEL_SCALE_SET_NAME
from shared.kube.client import load_configuration
from tests.sandbox.demo.test_cli import assert_each_job_ran_on_a_runner_of_its_own
from tests.sandbox.test_leash import exits_within

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="needs kubectl")
READY_LINE = "Ctrl-C stops everything and removes what it started."


def sandbox(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox", *args], capture_output=True, text=True, check=False
    )


def kubectl(kubeconfig: Path, *args: str) -> str:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), "-n", NAMESPACE, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def promote_as(kubeconfig: Path, runner: str) -> None:
    async with client.ApiClient(await load_configuration(str(kubeconfig))) as api:
        await client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            "actions.github.com", "v1alpha1", NAMESPACE, "ephemeralrunners", runner,
            {"status": {"phase": "Running"}}, _content_type="application/merge-patch+json",
        )  # fmt: skip


def read_until(stream: IO[str], text: str) -> str:
    """The lines of `stream` up to the first that contains `text` (it must come)."""
    seen = []
    for line in stream:
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"{text!r} never came; got:\n{''.join(seen)}")


@pytest.fixture
def start_up(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[str], Path]]]:
    """Starts `gha-sandbox up --workdir TMP/sandbox --report TMP/report.json` with extra flags
    and returns once it is ready; kills what a test leaves running."""
    started: list[subprocess.Popen[str]] = []

    def start(*flags: str) -> tuple[subprocess.Popen[str], Path]:
        workdir = tmp_path / "sandbox"
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "sandbox", "up", "--workdir", str(workdir),
                "--report", str(tmp_path / "report.json"), *flags,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        read_until(proc.stdout, READY_LINE)
        return proc, workdir

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def kill_after(proc: subprocess.Popen[str], seconds: float) -> Iterator[None]:
    """Kill `proc` if the block takes longer than `seconds`, so a read of its output ends
    (at EOF) instead of waiting for ever for a line that does not come."""
    timer = threading.Timer(seconds, proc.kill)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def watch_runners(kubeconfig: Path) -> subprocess.Popen[str]:
    """`kubectl get ephemeralrunners --watch`, one line per event: `TYPE NAME PHASE`; the
    caller kills it (its `with` block then closes the pipe and reaps it)."""
    assert KUBECTL is not None
    return subprocess.Popen(
        [
            KUBECTL, "--kubeconfig", str(kubeconfig), "-n", NAMESPACE,
            "get", "ephemeralrunners", "--watch", "--output-watch-events",
            "-o", "jsonpath={.type} {.object.metadata.name} {.object.status.phase}{\"\\n\"}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate()
    return proc.returncode, out


def port_open(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as s:
        return s.connect_ex((parts.hostname or "", parts.port or 0)) == 0


def test_up_runs_added_jobs_and_sigterm_leaves_nothing_behind(
    start_up: Callable[..., tuple[subprocess.Popen[str], Path]], tmp_path: Path
) -> None:
    """In-cluster (the default): the controller and the listener are pods kubectl sees; jobs
    added from another process run; SIGTERM deletes the AutoscalingRunnerSet, stops the
    controller, leaves nothing behind and keeps the pods' logs in the workdir."""
    proc, workdir = start_up()
    state: dict[str, Any] = json.loads((workdir / "sandbox.json").read_text())
    assert (workdir / "sandbox.json").stat().st_mode & 0o777 == 0o600
    assert state["listener"] == "in-cluster"
    assert set(state["pids"]) == {"sandbox"}
    kubeconfig = Path(state["kubeconfig"])
    assert kubectl(kubeconfig, "get", "autoscalingrunnerset", SCALE_SET, "-o", "name")
    assert kubectl(kubeconfig, "get", "ephemeralrunnerset", state["runner_set"], "-o", "name")
    listener = state["listener_identity"].rpartition(":")[2]
    pods = kubectl(kubeconfig, "get", "pods", "-n", CONTROLLER_NAMESPACE, "-o", "name").split()
    assert f"pod/{listener}" in pods
    assert sum(p.startswith("pod/gha-controller-") for p in pods) == 2
    with watch_runners(kubeconfig) as watch:
        added = sandbox("job", "add", "--workdir", str(workdir), "--count", "2", "--duration", "1")
        assert added.returncode == 0, added.stderr
        assert added.stdout.startswith("queued 2 job(s): ")
        assert watch.stdout is not None
        # Each job's runner is deleted once its job is done.
        read_until(watch.stdout, "DELETED")
        read_until(watch.stdout, "DELETED")
        watch.kill()
    code, out = stop(proc)
    assert code == 0, out
    assert "stopped; nothing left behind" in out
    for pid in state["pids"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not port_open(state["kubernetes_url"])
    assert not port_open(state["actions_url"])
    # What it wrote is gone; the pods' logs stay for the user.
    logs = sorted(p.name for p in workdir.iterdir())
    assert f"{listener}.log" in logs
    assert sum(name.startswith("gha-controller-") for name in logs) == 2
    assert all(name.endswith(".log") for name in logs)
    report = json.loads((tmp_path / "report.json").read_text())
    assert_each_job_ran_on_a_runner_of_its_own(report["runners"], jobs=2)
    assert report["invariant_violations"] == []
    assert report["leftovers"] == {"kubernetes": [], "actions": []}


def test_running_written_by_another_identity_is_reported_and_fails_the_exit_code(
    start_up: Callable[..., tuple[subprocess.Popen[str], Path]], tmp_path: Path
) -> None:
    """With `--listener none` everything but the listener runs; a runner promoted to Running
    with the controller's credentials (which may patch runner status) breaks the invariant that
    only the listener writes Running, and `up` says so in its output, its report and its exit
    code."""
    proc, workdir = start_up("--listener", "none")
    state: dict[str, Any] = json.loads((workdir / "sandbox.json").read_text())
    assert set(state["pids"]) == {"sandbox", "controller"}
    admin = Path(state["kubeconfig"])
    with watch_runners(admin) as watch:
        kubectl(admin, "patch", "ephemeralrunnerset", SCALE_SET, "--type=merge",
                "-p", '{"spec":{"replicas":1}}')  # fmt: skip
        assert watch.stdout is not None
        name = read_until(watch.stdout, "ADDED").splitlines()[-1].split()[1]
        watch.kill()
    # One PATCH of the status, as the controller sends it: `kubectl patch --subresource=status`
    # reads the status first, which the controller's Role no longer grants (nothing needs it).
    asyncio.run(promote_as(workdir / "controller.kubeconfig", name))
    # The write is committed when kubectl returns; `up` checks every write while it runs, so
    # it has seen this one before it stops.
    code, out = stop(proc)
    assert code == 1, out
    assert "invariant violated" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert [(v["invariant"], v["object"]) for v in report["invariant_violations"]] == [
        ("running-not-by-listener", f"ephemeralrunner/{name}")
    ]
    assert CONTROLLER_USER in report["invariant_violations"][0]["detail"]


def test_a_busy_runner_deleted_killed_and_replicas_above_max_are_reported(
    start_up: Callable[..., tuple[subprocess.Popen[str], Path]], tmp_path: Path
) -> None:
    """A scale-down that deletes the runner of a running job (the controller's identity
    deleting it), a runner pod lost under its job, and the set's replicas raised above
    maxRunners: the report names each, with who did it, and the exit code is 1. docker-run,
    where the runner set is the demo's own and the controller's kubeconfig is in the workdir."""
    proc, workdir = start_up("--max-runners", "1", "--listener", "docker-run")
    state: dict[str, Any] = json.loads((workdir / "sandbox.json").read_text())
    admin = Path(state["kubeconfig"])
    with watch_runners(admin) as watch:
        added = sandbox("job", "add", "--workdir", str(workdir), "--duration", "600")
        assert added.returncode == 0, added.stderr
        assert watch.stdout is not None
        name = read_until(watch.stdout, " Running").splitlines()[-1].split()[1]
        watch.kill()
    kubectl(workdir / "controller.kubeconfig", "delete", "ephemeralrunner", name, "--wait=false")
    kubectl(admin, "delete", "pod", name, "--wait=false")
    kubectl(admin, "patch", "ephemeralrunnerset", SCALE_SET, "--type=merge",
            "-p", '{"spec":{"replicas":2}}')  # fmt: skip
    code, out = stop(proc)
    assert code == 1, out
    report = json.loads((tmp_path / "report.json").read_text())
    violations = {
        (v["invariant"], v["object"]): v["detail"] for v in report["invariant_violations"]
    }
    assert CONTROLLER_USER in violations["busy-runner-deleted", f"ephemeralrunner/{name}"]
    assert (
        "replicas 2 > maxRunners 1"
        in violations["replicas-above-max", f"ephemeralrunnerset/{SCALE_SET}"]
    )
    # The service cancels the job whose runner went with its pod.
    assert report["runners"]["killed_while_busy"] == 1


@pytest.mark.parametrize("listener", ["docker-run", "in-cluster"])
def test_deleting_the_runner_namespace_with_busy_runners_finishes_while_up_keeps_running(
    start_up: Callable[..., tuple[subprocess.Popen[str], Path]], tmp_path: Path, listener: str
) -> None:
    """`kubectl delete namespace` under busy runners, as a user runs it against `up`: the
    namespace goes (the emulator's namespace controller deletes the controller's RoleBinding
    first, as a real one may; docs/install.md#deleting-a-runner-namespace) and nothing is left.
    The listener exits when its Role goes; `up` reports that and keeps the rest running
    (before, it stopped everything, so the deletion could not be watched to its end)."""
    proc, workdir = start_up("--listener", listener)
    state: dict[str, Any] = json.loads((workdir / "sandbox.json").read_text())
    admin = Path(state["kubeconfig"])
    with watch_runners(admin) as watch:
        added = sandbox("job", "add", "--workdir", str(workdir), "--count", "2",
                        "--duration", "600")  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert watch.stdout is not None
        read_until(watch.stdout, " Running")
        read_until(watch.stdout, " Running")
        watch.kill()
    kubectl(admin, "delete", "namespace", NAMESPACE, "--timeout=60s")
    kubectl(admin, "wait", "--for=delete", f"namespace/{NAMESPACE}", "--timeout=60s")
    if listener == "in-cluster":
        # In-cluster two endings race, and both are right: the namespace controller deletes
        # the AutoscalingRunnerSet, whose finalizer makes the controller delete the listener
        # (a clean exit, nothing to report), unless the listener's next set patch met the
        # missing Role first (exit 1, reported). Wait for the listener pod to be gone.
        kubectl(admin, "wait", "--for=delete", "autoscalinglisteners", "--all",
                "-n", CONTROLLER_NAMESPACE, "--timeout=60s")  # fmt: skip
        kubectl(admin, "wait", "--for=delete", "pods", "-l",
                f"{LABEL_SCALE_SET_NAME}={SCALE_SET}",
                "-n", CONTROLLER_NAMESPACE, "--timeout=60s")  # fmt: skip
        # The controller still runs: `up` is still up.
        assert proc.poll() is None
        code, out = stop(proc)
        role_lost = "listener exited with code 1; the rest keeps running" in out
        if role_lost:
            assert "lacks the Role rule" in out, out
    else:
        # The listener's Role (in the runner namespace) went with the namespace: the listener
        # says so and exits when it next patches its set; `up` reports it.
        assert proc.stdout is not None
        with kill_after(proc, 60):
            exited = read_until(proc.stdout, "the rest keeps running")
            assert "listener exited with code 1; the rest keeps running" in exited
            assert "lacks the Role rule" in read_until(proc.stdout, "listener stopped:")
        assert proc.poll() is None
        code, out = stop(proc)
        role_lost = True
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["leftovers"]["kubernetes"] == [], out
    assert report["invariant_violations"] == [], out
    assert report["components"]["crash"] is None, out
    # The listener's exit on a lost Role is still a component failure in the report and the
    # exit code; a listener its controller deleted ended cleanly.
    listener_code = report["components"]["exit_codes"]["listener"]
    assert listener_code == 1 if role_lost else listener_code in (0, None), out
    assert ("listener stopped with exit code 1" in out) is role_lost, out
    assert code == (1 if role_lost else 0), out


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; the leash is Linux's")
@pytest.mark.parametrize("listener", ["in-cluster", "docker-run"])
def test_sigkill_of_up_leaves_no_process_behind(
    start_up: Callable[..., tuple[subprocess.Popen[str], Path]], listener: str
) -> None:
    """An emulator killed without running its shutdown (SIGKILL, a crash, the OOM killer): the
    controller and listener processes it started die with it (docs/sandbox.md#processes), so
    they hold no port and no CPU and the next run starts. Before, they kept running."""
    proc, workdir = start_up("--listener", listener)
    state: dict[str, Any] = json.loads((workdir / "sandbox.json").read_text())
    children = children_of(proc.pid)
    # In-cluster the kubelet's two controller replicas and the listener pod; docker-run the
    # controller and the listener the sandbox started.
    assert len(children) >= (3 if listener == "in-cluster" else 2), children
    proc.kill()
    proc.communicate()
    for child in children:
        assert exits_within(child, 15), child
    assert not port_open(state["kubernetes_url"])
