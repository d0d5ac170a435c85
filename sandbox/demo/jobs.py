"""`gha-sandbox job add --workdir DIR`: queue jobs on the sandbox `gha-sandbox up` runs there,
through the Actions emulator's admin API (its URL and the labels come from DIR/sandbox.json)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import aiohttp

from sandbox.demo.up import STATE_FILE
from sandbox.demo.workload import RESULTS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gha-sandbox job", description="Queue jobs on a sandbox started by gha-sandbox up."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="queue jobs for the sandbox's runner set")
    add.add_argument("--workdir", type=Path, required=True, help="the directory `up` was given")
    add.add_argument("--count", type=int, default=1, help="how many jobs (default 1)")
    add.add_argument("--duration", type=float, default=30.0, help="seconds each runs (30)")
    add.add_argument("--result", choices=RESULTS, default="succeeded", help="how each ends")
    return parser


async def add_jobs(
    url: str, *, labels: list[str], count: int, duration: float, result: str
) -> list[int]:
    body = {"labels": labels, "duration": duration, "result": result}
    ids = []
    async with aiohttp.ClientSession(raise_for_status=True) as session:
        for _ in range(count):
            async with session.post(f"{url}/_admin/jobs", json=body) as response:
                ids.append(int((await response.json())["runnerRequestId"]))
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.count < 1 or args.duration < 0:
        parser.error("needs --count >= 1 and --duration >= 0")
    try:
        state = json.loads((args.workdir / STATE_FILE).read_text())
    except (OSError, ValueError):
        print(
            f"gha-sandbox job: no sandbox is up in {args.workdir} (no readable {STATE_FILE}); "
            f"start one with gha-sandbox up --workdir {args.workdir}",
            file=sys.stderr,
        )
        return 2
    try:
        ids = asyncio.run(
            add_jobs(
                state["actions_url"],
                labels=state["labels"],
                count=args.count,
                duration=args.duration,
                result=args.result,
            )
        )
    except aiohttp.ClientError as exc:
        print(
            f"gha-sandbox job: the sandbox in {args.workdir} did not answer: {exc}", file=sys.stderr
        )
        return 1
    print(f"queued {len(ids)} job(s): {', '.join(map(str, ids))}")
    return 0
