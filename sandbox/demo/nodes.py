"""`gha-sandbox node list|cordon|uncordon|drain --workdir DIR`: the nodes of the sandbox
`gha-sandbox up` runs there, through its admin kubeconfig (docs/sandbox.md#nodes).

`drain` does what `kubectl drain --ignore-daemonsets --delete-emptydir-data` does: cordon the
node, evict each of its pods (mirror and DaemonSet pods aside) through the eviction API, retry an
eviction a budget refuses (429) every few seconds, and wait until each evicted pod is gone. The
demo's `--drain-at` runs the same code in-process (`drain`), over the same HTTP API.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

from sandbox.demo.cluster import ADMIN_KUBECONFIG
from shared.kube.client import configuration_from_dict

Obj = dict[str, Any]
RETRY = 5.0
POLL = 0.5
MIRROR = "kubernetes.io/config.mirror"


class DrainError(Exception):
    """The drain stopped: one line saying why."""


@dataclass
class Drain:
    """What a drain did: its node, the time it took, the pods it evicted and the refusals."""

    node: str
    seconds: float = 0.0
    evicted: list[str] = field(default_factory=list)
    refusals: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    """Per pod (`namespace/name`), the 429s its eviction got before it went."""


def _evictable(pod: client.V1Pod) -> bool:
    meta = pod.metadata
    if MIRROR in (meta.annotations or {}):
        return False
    return not any(
        ref.controller and ref.kind == "DaemonSet" for ref in meta.owner_references or []
    )


async def cordon(core: client.CoreV1Api, node: str, *, on: bool = True) -> None:
    await core.patch_node(node, {"spec": {"unschedulable": True if on else None}})


async def drain(
    core: client.CoreV1Api,
    node: str,
    *,
    retry: float = RETRY,
    say: Callable[[str], None] = lambda _: None,
) -> Drain:
    """Cordon `node`, evict its pods and wait until they are gone; raises DrainError. A
    caller that gives up wraps it in `asyncio.timeout`."""
    started = time.monotonic()
    result = Drain(node)
    try:
        await cordon(core, node)
        say(f"node/{node} cordoned")
        listed = await core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
        tasks = [
            asyncio.create_task(_evict(core, p, result, retry=retry, say=say))
            for p in listed.items
            if _evictable(p)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
    except client.ApiException as exc:
        raise DrainError(f"drain of node/{node} failed: {_reason(exc)}") from exc
    result.seconds = time.monotonic() - started
    say(f"node/{node} drained in {result.seconds:.1f} s")
    return result


def _reason(exc: client.ApiException) -> str:
    with contextlib.suppress(ValueError, TypeError):
        return str(json.loads(exc.body)["message"])
    return f"{exc.status} {exc.reason}"


async def _evict(
    core: client.CoreV1Api,
    pod: client.V1Pod,
    result: Drain,
    *,
    retry: float,
    say: Callable[[str], None],
) -> None:
    ns, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
    key = f"{ns}/{name}"
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))
    while True:
        say(f"evicting pod {key}")
        try:
            await core.create_namespaced_pod_eviction(name, ns, body)
            break
        except client.ApiException as exc:
            if exc.status == 404:
                return
            if exc.status != 429:
                raise
            result.refusals += 1
            result.refused[key] = result.refused.get(key, 0) + 1
            say(f"error when evicting pod {key} (will retry after {retry:g}s): {_reason(exc)}")
            await asyncio.sleep(retry)
    while True:
        try:
            current = await core.read_namespaced_pod(name, ns)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            break
        if current.metadata.uid != uid:
            break
        await asyncio.sleep(POLL)
    result.evicted.append(key)
    say(f"pod/{name} evicted")


async def rows(core: client.CoreV1Api) -> list[tuple[str, str, int]]:
    """(node, status, pods bound to it) for each node."""
    nodes = (await core.list_node()).items
    pods = (await core.list_pod_for_all_namespaces()).items
    out = []
    for node in nodes:
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        status = "Ready" if ready else "NotReady"
        if node.spec.unschedulable:
            status += ",SchedulingDisabled"
        count = sum(
            1
            for p in pods
            if p.spec.node_name == node.metadata.name
            and p.status.phase not in ("Succeeded", "Failed")
        )
        out.append((node.metadata.name, status, count))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gha-sandbox node",
        description="List, cordon, uncordon or drain the nodes of a sandbox started by "
        "gha-sandbox up (--nodes N gives it N worker nodes).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="each node, its status and its pods")
    listing.add_argument("--workdir", type=Path, required=True, help="the directory `up` was given")
    for command, what in (
        ("cordon", "mark the node unschedulable"),
        ("uncordon", "mark the node schedulable again"),
        ("drain", "cordon the node, evict its pods and wait until they are gone"),
    ):
        sub = commands.add_parser(command, help=what)
        sub.add_argument("name", help="the node, e.g. sandbox-node-2")
        sub.add_argument("--workdir", type=Path, required=True, help="the directory `up` was given")
        if command == "drain":
            sub.add_argument(
                "--retry",
                type=float,
                default=RETRY,
                help=f"seconds between evictions a budget refuses ({RETRY:g}, as kubectl)",
            )
            sub.add_argument(
                "--timeout", type=float, help="give up after this many seconds (default: never)"
            )
    return parser


async def _run(args: argparse.Namespace, kubeconfig: Obj) -> int:
    config = await configuration_from_dict(kubeconfig)
    async with client.ApiClient(config) as api:
        core = client.CoreV1Api(api)
        if args.command == "list":
            print(f"{'NAME':<24} {'STATUS':<28} PODS")
            for name, status, count in await rows(core):
                print(f"{name:<24} {status:<28} {count}")
        elif args.command in ("cordon", "uncordon"):
            await cordon(core, args.name, on=args.command == "cordon")
            print(f"node/{args.name} {args.command}ed")
        else:
            try:
                async with asyncio.timeout(args.timeout):
                    result = await drain(
                        core, args.name, retry=args.retry, say=lambda line: print(line, flush=True)
                    )
            except TimeoutError as exc:
                raise DrainError(
                    f"drain of node/{args.name} gave up after {args.timeout:g} s with pods left"
                ) from exc
            print(
                f"evicted {len(result.evicted)} pod(s), {result.refusals} eviction(s) refused "
                f"by a disruption budget, in {result.seconds:.1f} s"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "drain" and (
        args.retry <= 0 or (args.timeout is not None and args.timeout <= 0)
    ):
        parser.error("needs --retry > 0 and --timeout > 0")
    try:
        kubeconfig = yaml.safe_load((args.workdir / ADMIN_KUBECONFIG).read_text())
    except (OSError, yaml.YAMLError):
        print(
            f"gha-sandbox node: no sandbox is up in {args.workdir} (no {ADMIN_KUBECONFIG}); "
            f"start one with gha-sandbox up --workdir {args.workdir}",
            file=sys.stderr,
        )
        return 2
    try:
        return asyncio.run(_run(args, kubeconfig))
    except DrainError as exc:
        print(f"gha-sandbox node: {exc}", file=sys.stderr)
        return 1
    except client.ApiException as exc:
        print(f"gha-sandbox node: {args.command} failed: {_reason(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(
            f"gha-sandbox node: the sandbox in {args.workdir} did not answer: {exc}",
            file=sys.stderr,
        )
        return 1
