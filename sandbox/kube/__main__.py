"""`python -m sandbox.kube --port 0 --kubeconfig PATH [--tls]` (also `gha-sandbox kube`).

Serves the emulator on 127.0.0.1, writes an admin kubeconfig (atomically), then prints the URL as
the first line of stdout, so a reader of that line can use the kubeconfig at once. Exits cleanly
on SIGTERM or SIGINT. Without --tls, requests without credentials act as the admin, because
kubectl sends no bearer token over plain http.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.kubelet.node import MAX_NODES


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gha-sandbox kube",
        description="Run the Kubernetes API server emulator on 127.0.0.1.",
    )
    p.add_argument("--port", type=int, default=0, help="TCP port (0 picks a free one)")
    p.add_argument("--kubeconfig", required=True, help="where to write the admin kubeconfig")
    p.add_argument("--tls", action="store_true", help="serve HTTPS with a throwaway CA")
    p.add_argument(
        "--crds",
        action="append",
        default=None,
        help="CRD YAML file or directory to register at start (repeatable; default: none, as "
        "a fresh cluster has no CRDs until you apply them)",
    )
    p.add_argument("--pod-start-latency", type=float, default=0.0, help="seconds before pods run")
    p.add_argument(
        "--nodes",
        type=int,
        default=1,
        help=f"worker nodes the kubelet runs: sandbox-node, sandbox-node-2, ... (1-{MAX_NODES}; "
        "default 1)",
    )
    p.add_argument(
        "--no-processes",
        action="store_true",
        help="do not run containers of the project's image (gha-runner-scaler) as local "
        "processes; every container then runs until its pod is deleted",
    )
    return p


def _crd_files(args: argparse.Namespace) -> list[Path]:
    files: list[Path] = []
    for item in args.crds or []:
        path = Path(item)
        files.extend(sorted(path.glob("*.yaml")) if path.is_dir() else [path])
    return files


async def _serve(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    kube = KubeEmulator(
        tls=args.tls,
        port=args.port,
        pod_start_latency=args.pod_start_latency,
        insecure_admin=not args.tls,
        run_project_image=not args.no_processes,
        nodes=args.nodes,
    )
    try:
        await kube.start()
    except OSError as exc:
        print(f"cannot listen on {kube.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        kube.apply_crds(_crd_files(args))
        kube.write_kubeconfig(args.kubeconfig)
        print(kube.url, flush=True)
        await stop.wait()
    finally:
        await kube.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not 1 <= args.nodes <= MAX_NODES:
        print(f"--nodes: give 1 to {MAX_NODES}, not {args.nodes}", file=sys.stderr)
        return 2
    for path in _crd_files(args):
        if not path.is_file():
            print(
                f"--crds: {path} is not a file; give a CRD YAML file or directory", file=sys.stderr
            )
            return 2
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
