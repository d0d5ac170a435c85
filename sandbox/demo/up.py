"""`gha-sandbox up --workdir DIR`: the system of `gha-sandbox demo` left running to explore.

It writes DIR/kubeconfig (admin) and DIR/sandbox.json (URLs, PAT, names), prints how to use
them, checks the invariants while it runs, and on SIGINT or SIGTERM stops everything, removes the
files it wrote (the logs stay) and reports what it found. In-cluster (the default) the controller
and the listener run as pods of the Kubernetes emulator, whose logs land in DIR when it stops;
`--listener none` runs the docker-run path without the listener, for a listener started outside
(docs/sandbox.md#up).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from sandbox.demo.cli import add_system_flags, check_system_flags
from sandbox.demo.cluster import (
    ADMIN_KUBECONFIG,
    CONTROLLER_NAMESPACE,
    NAMESPACE,
    System,
    SystemOptions,
    start_system,
)
from sandbox.demo.observe import Observer
from sandbox.demo.report import write_report
from sandbox.kube.kubelet.node import node_names

STATE_FILE = "sandbox.json"
# Everything `up` writes into DIR besides the logs, removed when it stops.
WRITTEN = (
    STATE_FILE,
    ADMIN_KUBECONFIG,
    "controller.kubeconfig",
    "listener.kubeconfig",
    "listener-config.json",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gha-sandbox up",
        description="Start the controller, a listener and both emulators and leave them running "
        "until Ctrl-C (SIGINT or SIGTERM); then stop everything and remove what it wrote.",
    )
    parser.add_argument(
        "--workdir", type=Path, required=True, help="where the kubeconfig, sandbox.json and logs go"
    )
    parser.add_argument(
        "--listener",
        choices=["in-cluster", "docker-run", "none"],
        default="in-cluster",
        help="in-cluster (default): the controller's Deployment from manifests/ and the listener "
        "pod it makes for the example AutoscalingRunnerSet, run by the Kubernetes emulator; "
        "docker-run: the controller and a listener as processes outside the cluster; none: "
        "docker-run without the listener, for one started outside",
    )
    add_system_flags(parser, max_runners=10)
    parser.add_argument(
        "--report",
        type=Path,
        help="on exit, write a JSON report here: runners, invariant violations, leftovers",
    )
    return parser


def state(system: System, workdir: Path) -> dict[str, object]:
    """What DIR/sandbox.json holds (docs/sandbox.md#up)."""
    found: dict[str, object] = {
        "kubernetes_url": system.kube.url,
        "actions_url": system.gh.url,
        "configure_url": system.gh.config_url(),
        "github_token": system.pat,
        "kubeconfig": str(workdir / ADMIN_KUBECONFIG),
        "namespace": NAMESPACE,
        "runner_set": system.runner_set_name(),
        "runner_scale_set_id": system.scale_set_id,
        "labels": system.labels,
        "listener": system.options.listener,
        "listener_identity": system.listener_user,
        "nodes": list(node_names(system.options.nodes)),
        "pids": {"sandbox": os.getpid()}
        | {name: c.proc.pid for name, c in system.components.items()},
    }
    if not system.in_cluster:
        found["listener_kubeconfig"] = str(workdir / "listener.kubeconfig")
        found["listener_config"] = str(workdir / "listener-config.json")
    return found


def _usage(system: System, workdir: Path) -> str:
    lines = [
        f"gha-sandbox is up: Kubernetes API {system.kube.url}, Actions service {system.gh.url}",
        f"URLs, PAT and names: {workdir / STATE_FILE}; logs: {workdir}/*.log",
        f"  export KUBECONFIG={workdir / ADMIN_KUBECONFIG}",
        f"  kubectl get ephemeralrunners -n {NAMESPACE} -w",
        *(
            [f"  kubectl get pods -n {CONTROLLER_NAMESPACE}   # the controller and the listener"]
            if system.in_cluster
            else []
        ),
        f"  gha-sandbox job add --workdir {workdir} --count 5 --duration 30",
        *(
            [f"  gha-sandbox node drain sandbox-node-2 --workdir {workdir}   # as kubectl drain"]
            if system.options.nodes > 1
            else []
        ),
    ]
    if system.options.listener == "none":
        lines.append(
            f"  no listener runs: start yours with {workdir / 'listener-config.json'} and "
            f"{workdir / 'listener.kubeconfig'} (the gha-listener ServiceAccount of {NAMESPACE})"
        )
    lines.append("Ctrl-C stops everything and removes what it started.")
    return "\n".join(lines)


async def _up(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    workdir: Path = args.workdir
    options = SystemOptions(
        min_runners=args.min_runners,
        max_runners=args.max_runners,
        pod_start_latency=args.pod_start_latency,
        registration_latency=args.registration_latency,
        nodes=args.nodes,
        listener=args.listener,
        listener_exit_stops=False,
    )
    try:
        async with start_system(options, workdir) as system:
            await system.wait_ready(stop)
            observer = Observer(
                system.gh,
                system.kube,
                max_runners=args.max_runners,
                listener_user=system.listener_user,
            )
            watching = asyncio.create_task(observer.run())
            system.kube.write_kubeconfig(workdir / ADMIN_KUBECONFIG)
            state_path = workdir / STATE_FILE
            state_path.write_text(json.dumps(state(system, workdir), indent=2) + "\n")
            state_path.chmod(0o600)
            console.print(_usage(system, workdir), markup=False)
            reported = exited = 0

            def report_exits() -> int:
                for exit in system.exits[exited:]:
                    console.print(
                        f"{exit.component} exited with code {exit.exit_code}; the rest keeps "
                        f"running; the end of its log:\n{exit.log_tail}",
                        markup=False,
                    )
                return len(system.exits)

            while not stop.is_set() and not system.crashed.done():
                observer.check_killed()
                for violation in observer.violations[reported:]:
                    console.print(f"invariant violated: {violation}", markup=False)
                reported = len(observer.violations)
                exited = report_exits()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=0.5)
            # An exit seen in the last half second is reported before the teardown too.
            report_exits()
            if system.crashed.done():
                crashed = system.crashed.result()
                console.print(
                    f"{crashed.component} exited with code {crashed.exit_code}; the end of its "
                    f"log:\n{crashed.log_tail}",
                    markup=False,
                )
            console.print("stopping")
            teardown = await system.stop()
            observer.check_killed()
            watching.cancel()
            crash = asdict(system.crashed.result()) if system.crashed.done() else None
    finally:
        for name in WRITTEN:
            (workdir / name).unlink(missing_ok=True)
    problems = [f"invariant violated: {v}" for v in observer.violations]
    problems += [f"left over in Kubernetes: {item}" for item in teardown.kubernetes]
    problems += [f"left over in Actions: {item}" for item in teardown.actions]
    problems += [
        f"{name} stopped with exit code {code}"
        for name, code in teardown.exit_codes.items()
        if code not in (0, None)
    ]
    for problem in problems:
        console.print(problem, markup=False)
    if args.report:
        write_report(
            args.report,
            {
                "runners": {
                    "created": len(observer.runners),
                    "killed_while_busy": observer.killed_while_busy,
                    "lifecycles": dict(
                        Counter(">".join(t.phases) for t in observer.runners.values())
                    ),
                },
                "leftovers": {"kubernetes": teardown.kubernetes, "actions": teardown.actions},
                "components": {"exit_codes": teardown.exit_codes, "crash": crash},
                "invariant_violations": observer.violations,
            },
        )
    console.print("stopped; " + ("nothing left behind" if not problems else "see above"))
    return 1 if problems or crash else 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_system_flags(parser, args)
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_up(args))
