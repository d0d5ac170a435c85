"""scripts/image-test: build the image and run it the way a user would (docs/install.md, "The
image test").

1. A stand-in for `python:3.11-slim`, since no registry is pulled here: `debootstrap
   --variant=minbase` bookworm with Debian's python3.11, python3-venv and python-is-python3, the
   host's CA bundle and a pip setting that trusts it (so pip in the build reaches the index).
2. The README's "Run a listener with docker run", every command as written, through a `docker`
   that is podman (`--runtime runc`, the machine's ulimits; `docker build` gets
   `--build-arg BASE=` the stand-in), against `gha-sandbox up --listener none`: jobs queued, the
   set scales, runners go Running by the listener's identity (the sandbox's invariants), the
   jobs complete, `docker stop` exits 0 and the session is gone, uid 10001, /readyz and
   /metrics answer. Then its "Two containers for one scale set (standby)": both containers
   answer /readyz on their ports (the step's `-e LISTENER_METRICS_ADDR` over `--env-file`), the
   Lease's holder runs jobs, `docker kill` (SIGKILL) of it while more jobs are queued: the other
   container takes the Lease, deletes the dead holder's session and opens its own (the takeover
   time), every job completes, no session creation met a 409, `docker stop` of the survivor exits
   0 and leaves no session. The image holds no pip, setuptools, sandbox or sources; both
   processes answer --version.
3. The controller from the same image (`gha-controller`), with a listener container, against
   the sandbox's emulators driven from this process: the same checks.

Needs root (rootful podman) and podman, runc and debootstrap; .ci/run installs them. Prints the
times and sizes BENCHMARKS.md records.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from listener.standby import SESSION_ANNOTATION
from sandbox.actions import ActionsEmulator
from sandbox.demo.cluster import CONTROLLER_NAMESPACE, NAMESPACE, SCALE_SET, setup_cluster
from sandbox.demo.observe import Observer
from sandbox.kube import KubeEmulator

ROOT = Path(__file__).resolve().parents[1]
BASE = "localhost/gha-image-test-base:bookworm"
IMAGE = "gha-runner-scaler:0.1.0"  # the README's tag
BASE_PACKAGES = "python3.11,python3-venv,python-is-python3"
MIRROR = "http://deb.debian.org/debian"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PODMAN = ["podman", "--runtime", "runc"]  # crun fails on these machines' hybrid cgroups
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
CONTAINER_UID = 10001
JOBS = 4
NAMESPACE_README = "arc-runners"  # the README's namespace and names
RUNNER_SET_README = "my-runners"
LEASE_README = "gha-listener"
# The README's step 8: each container's name and metrics port.
REPLICAS = {"gha-listener-my-runners-1": 8090, "gha-listener-my-runners-2": 8091}
JOB_SECONDS = 2.0
# Guards against a hung step, not performance limits.
STEP_GUARD_SECONDS = 900.0
WAIT_GUARD_SECONDS = 120.0
POLL_SECONDS = 0.2
SECTION = "## Run a listener with `docker run`"
# A stand-in for the user at the README's "fill in" step (the EDITOR it calls).
FILL_IN = """#!/bin/sh
sed -i -e 's|^LISTENER_CONFIGURE_URL=.*|LISTENER_CONFIGURE_URL={url}|' \\
  -e 's|^LISTENER_METRICS_ADDR=.*|LISTENER_METRICS_ADDR=:{port}|' listener.env
"""
# `docker` for the README's commands: podman with the machine's settings.
DOCKER = """#!/bin/sh
command=$1
shift
case "$command" in
  build) exec {podman} build --network host {ulimits} --build-arg BASE={base} "$@" ;;
  run) exec {podman} run {ulimits} "$@" ;;
  *) exec {podman} "$command" "$@" ;;
esac
"""


class Failed(Exception):
    """A check of the image test failed; the message says which."""


def log(message: str) -> None:
    print(f"image-test: {message}", flush=True)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failed(message)


def unusable() -> str | None:
    """Why podman cannot run here, or None."""
    if os.geteuid() != 0:
        return "not root (the test needs rootful podman)"
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install -y podman runc debootstrap)"
    return None


async def run(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, check_rc: bool = True
) -> tuple[int, str]:
    """Run a command to its end; its output (stdout and stderr) goes to the log and is returned."""
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), STEP_GUARD_SECONDS)
    text = out.decode(errors="replace")
    code = proc.returncode
    assert code is not None
    if check_rc and code != 0:
        raise Failed(f"{' '.join(args[:4])}... exited {code}:\n{text[-4000:]}")
    return code, text


def readme_steps() -> dict[int, str]:
    """The numbered steps (`# N. `) of the README's docker-run section, from all its sh blocks."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps: dict[int, str] = {}
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for found in re.finditer(r"^# (\d+)\. .*?(?=^# \d+\. |\Z)", block, re.S | re.M):
            steps[int(found.group(1))] = found.group(0)
    check(sorted(steps) == list(range(1, 9)), f"README steps found: {sorted(steps)}")
    return steps


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def answers_200(url: str) -> bool:
    return http_get(url)[0] == 200


def http_post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


async def until(what: str, predicate: Callable[[], bool]) -> None:
    """Poll `predicate` until it holds; the guard only stops a hung run."""
    deadline = time.monotonic() + WAIT_GUARD_SECONDS
    while not await asyncio.to_thread(predicate):
        if time.monotonic() > deadline:
            raise Failed(f"gave up waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# 1. The stand-in base


async def build_base(work: Path) -> float:
    rootfs = work / "rootfs"
    started = time.monotonic()
    await run(
        "debootstrap",
        "--variant=minbase",
        f"--include={BASE_PACKAGES}",
        "bookworm",
        str(rootfs),
        MIRROR,
    )
    (rootfs / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HOST_CA_BUNDLE, rootfs / "etc/ssl/certs/ca-certificates.crt")
    (rootfs / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
    # What python:3.11-slim leaves out too: package caches and lists, documentation.
    for path in ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
        shutil.rmtree(rootfs / path, ignore_errors=True)
    podman_import = shlex.join([*PODMAN, "import", "--change", 'CMD ["python3"]', "-", BASE])
    await run("sh", "-c", f"tar -C {shlex.quote(str(rootfs))} -c . | {podman_import}")
    shutil.rmtree(rootfs)
    return time.monotonic() - started


async def image_size(image: str) -> int:
    _, out = await run(*PODMAN, "image", "inspect", "--format", "{{.Size}}", image)
    return int(out.strip())


async def container_uid(name: str) -> int:
    _, out = await run(
        *PODMAN, "exec", name, "python", "-c", "import os; print(os.getuid(), os.getgid())"
    )
    return int(out.split()[0])


# In the image: what must not be there (pip, setuptools, the sandbox, the sources, a pip cache),
# the version both processes print, and every distribution installed (docs/security.md's
# "Verifying an image" command).
CONTENTS = """
import importlib.metadata, importlib.util, pathlib, re, subprocess
found = [m for m in ("pip", "setuptools", "sandbox") if importlib.util.find_spec(m)]
found += [p for p in ("/src", "/root/.cache/pip", "/opt/venv/bin/pip") if pathlib.Path(p).exists()]
print(" ".join(found) or "clean")
for command in ("gha-listener", "gha-controller"):
    print(subprocess.run([command, "--version"], capture_output=True, text=True).stdout.strip())
print(*sorted(
    re.sub(r"[-_.]+", "-", d.name).lower() + "==" + d.version
    for d in importlib.metadata.distributions()
))
"""


def locked_distributions() -> set[str]:
    """What the image must hold: requirements.lock's pins and the project itself."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = (ROOT / "requirements.lock").read_text()
    pins = re.findall(r"^([A-Za-z0-9][^ =]*==[^ ]+)", lock, re.M)
    return {*pins, f"{project['name']}=={project['version']}"}


async def image_checks() -> None:
    # As root, which may look into /root.
    _, out = await run(
        *PODMAN, "run", "--rm", *ULIMITS, "--user", "0", IMAGE, "python", "-c", CONTENTS
    )
    lines = out.strip().splitlines()
    check(lines[0] == "clean", f"the image holds {lines[0]}")
    check(
        lines[1].startswith("gha-listener ") and lines[2].startswith("gha-controller "),
        f"--version: {lines[1:]}",
    )
    installed, locked = set(lines[3].split()), locked_distributions()
    check(
        installed == locked,
        f"the image is not the lock: {sorted(installed - locked)} not locked, "
        f"{sorted(locked - installed)} missing",
    )


async def exit_code_of_stop(name: str) -> int:
    """`podman stop` (SIGTERM), then the container's exit code."""
    await run(*PODMAN, "stop", "--time", "30", name)
    _, out = await run(*PODMAN, "inspect", "--format", "{{.State.ExitCode}}", name)
    return int(out.strip())


# 2. The README against gha-sandbox up --listener none


@contextlib.asynccontextmanager
async def sandbox_up(workdir: Path, report: Path) -> AsyncIterator[dict[str, Any]]:
    """`gha-sandbox up --listener none`, until its sandbox.json exists; SIGTERM on exit, then
    its exit code must be 0 (no invariant violated, nothing left behind)."""
    gha_sandbox = Path(sys.executable).parent / "gha-sandbox"
    log_file = (workdir.parent / "sandbox-up.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        str(gha_sandbox),
        "up",
        "--workdir",
        str(workdir),
        "--listener",
        "none",
        "--report",
        str(report),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=log_file,
        stderr=log_file,
    )
    state_file = workdir / "sandbox.json"
    try:
        await until("gha-sandbox up", lambda: state_file.exists() or proc.returncode is not None)
        check(proc.returncode is None, f"gha-sandbox up exited {proc.returncode}")
        yield json.loads(state_file.read_text())
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), WAIT_GUARD_SECONDS)
        log_file.close()
    if code != 0:
        raise Failed(
            f"gha-sandbox up exited {code}:\n{(workdir.parent / 'sandbox-up.log').read_text()}"
        )


def kubectl_json(kubeconfig: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args, "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    result: dict[str, Any] = json.loads(out)
    return result


class Progress:
    """What polling saw of a runner set and its runners."""

    def __init__(self) -> None:
        self.max_replicas = 0
        self.running: set[str] = set()


async def readme_phase(work: Path, timings: dict[str, float]) -> None:
    steps = readme_steps()
    home = work / "home"
    bin_dir = work / "bin"
    home.mkdir()
    bin_dir.mkdir()
    sandbox_dir = work / "sandbox"
    report_path = work / "sandbox-report.json"
    async with sandbox_up(sandbox_dir, report_path) as state:
        port = free_port()
        (bin_dir / "docker").write_text(
            DOCKER.format(podman=" ".join(PODMAN), ulimits=" ".join(ULIMITS), base=BASE)
        )
        (bin_dir / "fill-in").write_text(FILL_IN.format(url=state["configure_url"], port=port))
        for script in bin_dir.iterdir():
            script.chmod(0o755)
        env = {
            "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
            "HOME": str(home),
            "KUBECONFIG": state["kubeconfig"],
            "GITHUB_PAT": state["github_token"],
            "EDITOR": str(bin_dir / "fill-in"),
        }
        listener_dir = home / "gha-listeners" / "my-runners"

        async def step(numbers: range, cwd: Path) -> None:
            script = "\n".join(steps[n] for n in numbers)
            log(f"README steps {numbers.start}-{numbers.stop - 1}")
            await run("bash", "-euo", "pipefail", "-c", script, cwd=cwd, env=env)

        started = time.monotonic()
        await step(range(1, 2), ROOT)
        timings["image build (s)"] = time.monotonic() - started
        await step(range(2, 5), ROOT)
        for name in ("github-token", "token/listener.token", "listener.kubeconfig"):
            mode = (listener_dir / name).stat().st_mode & 0o777
            check(mode == 0o640, f"{name} has mode {mode:o}, not 0640")
        check(
            ROOT not in listener_dir.resolve().parents,
            "the credentials must be outside the checkout",
        )
        started = time.monotonic()
        await step(range(5, 6), listener_dir)
        base_url = f"http://127.0.0.1:{port}"
        await until("the listener's /readyz", lambda: http_get(base_url + "/readyz")[0] == 200)
        timings["listener start to ready (s)"] = time.monotonic() - started
        await listener_checks(
            "gha-listener-my-runners",
            base_url,
            actions_url=state["actions_url"],
            kubeconfig=state["kubeconfig"],
            namespace=NAMESPACE_README,
            runner_set=RUNNER_SET_README,
        )
        log("README step 6")
        _, out = await run("bash", "-euo", "pipefail", "-c", steps[6], cwd=listener_dir, env=env)
        check(out.strip().splitlines()[-2:-1] == ["0"], f"docker stop: exit code {out!r}")
        check(not sessions_of(state["actions_url"]), "the listener's session is still open")
        log("README steps 7-8")
        _, out = await run(
            "bash", "-euo", "pipefail", "-c", steps[7] + steps[8], cwd=listener_dir, env=env
        )
        printed = out.strip().splitlines()[-1]
        log(f"step 8 printed the Lease's holder: {printed}")
        try:
            await standby_checks(state, env, timings, printed_holder=printed)
        finally:
            await run("docker", "rm", "--force", *REPLICAS, env=env, check_rc=False)
        # What the sandbox did not make, so that it finds nothing left over when it stops.
        for kind, name in (
            ("ephemeralrunnerset", RUNNER_SET_README),
            ("lease", LEASE_README),
            ("rolebinding", "gha-listener-standby"),
            ("role", "gha-listener-standby"),
        ):
            await run("kubectl", "-n", NAMESPACE_README, "delete", kind, name, "--wait", env=env)
    report = json.loads(report_path.read_text())
    check(report["invariant_violations"] == [], f"violations: {report['invariant_violations']}")
    lifecycles = report["runners"]["lifecycles"]
    ran = sum(n for life, n in lifecycles.items() if "Running" in life.split(">"))
    # Step 5's jobs, then the standby's before and after the kill.
    check(ran >= 3 * JOBS, f"runner lifecycles: {lifecycles}")


def leader_identity(logs: str) -> str | None:
    """The Lease identity a listener's JSON log says it became leader as, or None."""
    for line in logs.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("msg") == "became leader":
                return str(record["identity"])
    return None


async def standby_checks(
    state: dict[str, Any], env: dict[str, str], timings: dict[str, float], *, printed_holder: str
) -> None:
    """The README's two containers sharing the Lease: the holder runs jobs, `docker kill` of it,
    the other takes over without a 409 and the jobs queued meanwhile complete."""
    actions_url, kubeconfig = state["actions_url"], state["kubeconfig"]
    for name, port in REPLICAS.items():
        # Each on its own port: step 8's `-e LISTENER_METRICS_ADDR` wins over `--env-file`.
        await until(
            f"{name}'s /readyz on {port}",
            functools.partial(answers_200, f"http://127.0.0.1:{port}/readyz"),
        )

    def lease() -> dict[str, Any]:
        return kubectl_json(kubeconfig, "-n", NAMESPACE_README, "get", "lease", LEASE_README)

    def session_on(found: dict[str, Any]) -> str:
        return str((found["metadata"].get("annotations") or {}).get(SESSION_ANNOTATION, ""))

    def holding() -> bool:
        found = lease()
        session = session_on(found)
        return bool(found["spec"].get("holderIdentity")) and any(
            s["sessionId"] == session for s in sessions_of(actions_url)
        )

    await until("a holder of the Lease with an open session", holding)
    found = lease()
    identity, old_session = found["spec"]["holderIdentity"], session_on(found)
    check(
        identity == printed_holder, f"step 8 printed {printed_holder!r}, the Lease names {identity}"
    )
    leaders = {
        name: leader_identity((await run("docker", "logs", name, env=env))[1]) for name in REPLICAS
    }
    check(list(leaders.values()).count(None) == 1, f"became leader: {leaders}")
    holder = next(name for name, led in leaders.items() if led == identity)
    other = next(name for name in REPLICAS if name != holder)
    log(f"{holder} holds the Lease as {identity}, session {old_session}; {other} stands by")
    await listener_checks(
        holder,
        f"http://127.0.0.1:{REPLICAS[holder]}",
        actions_url=actions_url,
        kubeconfig=kubeconfig,
        namespace=NAMESPACE_README,
        runner_set=RUNNER_SET_README,
    )

    await run("docker", "kill", holder, env=env)
    killed = time.monotonic()
    ids = await queue_jobs(actions_url, RUNNER_SET_README)

    def taken_over() -> bool:
        return any(s["sessionId"] != old_session for s in sessions_of(actions_url))

    await until("the standby's session", taken_over)
    timings["standby takeover: docker kill to the other's session open (s)"] = (
        time.monotonic() - killed
    )
    sessions = [s["sessionId"] for s in sessions_of(actions_url)]
    check(old_session not in sessions, f"the dead holder's session {old_session} is still open")
    check(len(sessions) == 1, f"sessions open: {sessions}")
    _, logs = await run("docker", "logs", other, env=env)
    check(
        f"deleted the previous listener's message session {old_session}" in logs,
        f"{other} did not delete the dead holder's session",
    )
    successor = leader_identity(logs)
    check(successor is not None, f"{other} did not become leader")

    def recorded() -> bool:
        found = lease()
        return found["spec"].get("holderIdentity") == successor and session_on(found) in sessions

    await until(f"the Lease to name {other} and its session", recorded)
    seen = await until_complete(
        ids,
        actions_url=actions_url,
        kubeconfig=kubeconfig,
        namespace=NAMESPACE_README,
        runner_set=RUNNER_SET_README,
    )
    check(bool(seen.running), "no runner was seen Running after the takeover")
    conflicts = [
        r
        for r in requests_of(actions_url)
        if r["endpoint"] == "create_session" and r["status"] == 409
    ]
    check(not conflicts, f"session creation met 409: {conflicts}")
    log(
        f"{other} took over: {len(seen.running)} runners Running for the jobs queued after the kill"
    )

    _, out = await run("docker", "inspect", "-f", "{{.State.ExitCode}}", holder, env=env)
    check(out.strip() == "137", f"the killed holder's exit code: {out!r}")
    await run("docker", "stop", other, env=env)
    _, out = await run("docker", "inspect", "-f", "{{.State.ExitCode}}", other, env=env)
    check(out.strip() == "0", f"docker stop of {other}: exit code {out!r}")
    check(not sessions_of(actions_url), "the standby's session is still open after docker stop")
    await run("docker", "rm", *REPLICAS, env=env)


def sessions_of(actions_url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{actions_url}/_admin/state", timeout=10) as response:
        sessions: list[dict[str, Any]] = json.loads(response.read())["sessions"]
        return sessions


def requests_of(actions_url: str) -> list[dict[str, Any]]:
    """The Actions emulator's log of the requests it served (the admin API's aside)."""
    with urllib.request.urlopen(f"{actions_url}/_admin/requests", timeout=10) as response:
        requests: list[dict[str, Any]] = json.loads(response.read())
        return requests


def jobs_of(actions_url: str, ids: set[int]) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{actions_url}/_admin/state", timeout=10) as response:
        jobs: list[dict[str, Any]] = json.loads(response.read())["jobs"]
    return [j for j in jobs if j["runnerRequestId"] in ids]


async def listener_checks(
    container: str,
    base_url: str,
    *,
    actions_url: str,
    kubeconfig: str,
    namespace: str,
    runner_set: str,
) -> None:
    """Queue jobs for the set and watch it scale, its runners run them, the jobs complete."""
    check(await container_uid(container) == CONTAINER_UID, "the listener does not run as 10001")
    ids = await queue_jobs(actions_url, runner_set)
    seen = await until_complete(
        ids,
        actions_url=actions_url,
        kubeconfig=kubeconfig,
        namespace=namespace,
        runner_set=runner_set,
    )
    check(seen.max_replicas >= 1, "the set never scaled")
    check(bool(seen.running), "no runner was seen Running")
    status, metrics = await asyncio.to_thread(http_get, base_url + "/metrics")
    check(status == 200 and "gha_completed_jobs_total" in metrics, "the listener's /metrics")
    log(f"listener: replicas up to {seen.max_replicas}, {len(seen.running)} runners Running")


async def queue_jobs(actions_url: str, runner_set: str) -> set[int]:
    """JOBS jobs for the set's label; their ids."""
    job = {"labels": [runner_set], "duration": JOB_SECONDS, "result": "succeeded"}
    ids = set()
    for _ in range(JOBS):
        # In a thread: in the controller phase this process serves the Actions emulator.
        queued = await asyncio.to_thread(http_post, f"{actions_url}/_admin/jobs", job)
        ids.add(int(queued["runnerRequestId"]))
    return ids


async def until_complete(
    ids: set[int], *, actions_url: str, kubeconfig: str, namespace: str, runner_set: str
) -> Progress:
    """Watch the set's replicas and runners until the jobs `ids` have completed."""
    seen = Progress()

    def done() -> bool:
        ers = kubectl_json(kubeconfig, "-n", namespace, "get", "ephemeralrunnerset", runner_set)
        seen.max_replicas = max(seen.max_replicas, ers["spec"].get("replicas", 0))
        runners = kubectl_json(kubeconfig, "-n", namespace, "get", "ephemeralrunners")
        seen.running |= {
            r["metadata"]["name"]
            for r in runners["items"]
            if (r.get("status") or {}).get("phase") == "Running"
        }
        return all(j["state"] == "completed" for j in jobs_of(actions_url, ids))

    await until(f"{len(ids)} jobs to complete", done)
    return seen


# 3. The controller from the image, with a listener container, on the sandbox's emulators


async def controller_phase(work: Path) -> None:
    secrets = work / "controller-phase"
    secrets.mkdir()
    async with (
        ActionsEmulator(long_poll_timeout=2.0) as gh,
        KubeEmulator(tls=True, container_runtime=gh.runtime) as kube,
    ):
        pat = gh.add_pat()
        scale_set = gh.state.create_scale_set(
            name=SCALE_SET, runner_group_id=1, labels=[], runner_setting={}
        )
        setup_cluster(kube, config_url=gh.config_url(), pat=pat, scale_set_id=scale_set.id)
        observer = Observer(gh, kube, max_runners=10)
        watching = asyncio.create_task(observer.run())
        kube.write_kubeconfig(
            secrets / "controller.kubeconfig",
            token=kube.service_account_token(CONTROLLER_NAMESPACE, "gha-controller"),
        )
        kube.write_kubeconfig(
            secrets / "listener.kubeconfig",
            token=kube.service_account_token(NAMESPACE, "gha-listener"),
        )
        (secrets / "github-token").write_text(pat)
        for path in secrets.iterdir():
            path.chmod(0o600)
            os.chown(path, CONTAINER_UID, CONTAINER_UID)
        metrics_port, health_port, listener_port = free_port(), free_port(), free_port()
        common = [*PODMAN, "run", "-d", *ULIMITS, "--network", "host"]
        await run(
            *common,
            "--name",
            "gha-image-test-controller",
            "-v",
            f"{secrets / 'controller.kubeconfig'}:/run/secrets/kubeconfig:ro",
            "-e",
            "KUBECONFIG=/run/secrets/kubeconfig",
            "-e",
            f"GHA_CONTROLLER_LEASE_NAMESPACE={CONTROLLER_NAMESPACE}",
            "-e",
            f"GHA_CONTROLLER_METRICS_PORT={metrics_port}",
            "-e",
            f"GHA_CONTROLLER_HEALTH_PORT={health_port}",
            IMAGE,
            "gha-controller",
        )
        try:
            await until(
                "the controller's /readyz",
                lambda: http_get(f"http://127.0.0.1:{health_port}/readyz")[0] == 200,
            )
            check(
                await container_uid("gha-image-test-controller") == CONTAINER_UID,
                "the controller does not run as 10001",
            )
            await run(
                *common,
                "--name",
                "gha-image-test-listener",
                "-v",
                f"{secrets / 'listener.kubeconfig'}:/run/secrets/kubeconfig:ro",
                "-e",
                "KUBECONFIG=/run/secrets/kubeconfig",
                "-v",
                f"{secrets / 'github-token'}:/run/secrets/github-token:ro",
                "-e",
                "LISTENER_GITHUB_TOKEN_FILE=/run/secrets/github-token",
                "-e",
                f"LISTENER_CONFIGURE_URL={gh.config_url()}",
                "-e",
                f"LISTENER_EPHEMERAL_RUNNER_SET_NAMESPACE={NAMESPACE}",
                "-e",
                f"LISTENER_EPHEMERAL_RUNNER_SET_NAME={SCALE_SET}",
                "-e",
                f"LISTENER_RUNNER_SCALE_SET_ID={scale_set.id}",
                "-e",
                f"LISTENER_METRICS_ADDR=127.0.0.1:{listener_port}",
                IMAGE,
            )
            listener_url = f"http://127.0.0.1:{listener_port}"
            await until(
                "the listener's /readyz", lambda: http_get(listener_url + "/readyz")[0] == 200
            )
            admin = secrets / "admin.kubeconfig"
            kube.write_kubeconfig(admin)
            await listener_checks(
                "gha-image-test-listener",
                listener_url,
                actions_url=gh.url,
                kubeconfig=str(admin),
                namespace=NAMESPACE,
                runner_set=SCALE_SET,
            )
            status, metrics = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
            check(
                status == 200 and "controller_runtime_reconcile_total" in metrics,
                "the controller's /metrics",
            )
            code = await exit_code_of_stop("gha-image-test-listener")
            check(code == 0, f"the listener exited {code} on podman stop")
            check(not gh.state.sessions, "the listener's session is still open")
            code = await exit_code_of_stop("gha-image-test-controller")
            check(code == 0, f"the controller exited {code} on podman stop")
        finally:
            for name in ("gha-image-test-listener", "gha-image-test-controller"):
                await run(*PODMAN, "rm", "--force", "--ignore", name, check_rc=False)
            watching.cancel()
        check(observer.violations == [], f"violations: {observer.violations}")
        ran = [t.running_by for t in observer.runners.values() if t.running_by]
        check(
            len(ran) >= JOBS and set(ran) == {observer.listener_user},
            f"Running written by {ran}",
        )
        log(f"controller: {len(ran)} runners went Running, each by the listener")


async def main() -> int:
    reason = unusable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            log(f"cannot run in CI: {reason}")
            return 1
        log(f"skipped: {reason}")
        return 0
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="gha-image-test-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        try:
            log("building the stand-in base with debootstrap")
            timings["stand-in base build (s)"] = await build_base(work)
            await readme_phase(work, timings)
            sizes = {"stand-in base (MB)": await image_size(BASE)}
            sizes["image on the stand-in base (MB)"] = await image_size(IMAGE)
            await image_checks()
            await controller_phase(work)
        except Failed as exc:
            log(f"FAILED: {exc}")
            return 1
        finally:
            for image in (IMAGE, BASE):
                await run(*PODMAN, "rmi", "--force", "--ignore", image, check_rc=False)
            await run(*PODMAN, "image", "prune", "--force", check_rc=False)
        timings["whole image test (s)"] = time.monotonic() - started
    for name, seconds in timings.items():
        log(f"{name}: {seconds:.1f}")
    for name, size in sizes.items():
        log(f"{name}: {size / 1e6:.0f}")
    log("passed")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
