"""The README's quick start: `scripts/sandbox` runs and ends with the summary table, and every
sandbox command the section shows (`node drain` among them) is one its program accepts as
written.

The default workload takes about a minute, too long for CI; the script runs here with a small
burst, and the section's other commands are parsed by the parsers that run them (`gha-sandbox
up` and `job add` run as written in test_up.py).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from sandbox.demo import cli, jobs, nodes, up

ROOT = Path(__file__).resolve().parents[3]


def quick_start() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def sandbox_commands() -> list[list[str]]:
    """The `scripts/sandbox` and `gha-sandbox` commands of the section, from its shell blocks
    and its inline code."""
    section = quick_start()
    lines = [
        line.split("#", 1)[0]
        for block in re.findall(r"```sh\n(.*?)```", section, re.S)
        for line in block.splitlines()
    ]
    lines += re.findall(r"`(scripts/sandbox[^`]*)`", section)
    commands = [shlex.split(line) for line in lines]
    return [c for c in commands if c and c[0] in ("scripts/sandbox", ".venv/bin/gha-sandbox")]


def parser_for(command: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    if command[0] == "scripts/sandbox":
        return cli.build_parser(), command[1:]
    component, args = command[1], command[2:]
    parsers = {"up": up.build_parser, "job": jobs.build_parser, "node": nodes.build_parser}
    return parsers[component](), args


def test_the_section_shows_the_demo_the_plot_and_up() -> None:
    shown = [" ".join(c) for c in sandbox_commands()]
    assert "scripts/sandbox" in shown
    assert "scripts/sandbox --plot docs/sandbox-default.png" in shown
    assert any(c.startswith(".venv/bin/gha-sandbox up --workdir") for c in shown)
    assert any(c.startswith(".venv/bin/gha-sandbox job add --workdir") for c in shown)


@pytest.mark.parametrize("command", sandbox_commands(), ids=" ".join)
def test_each_sandbox_command_of_the_section_parses(command: list[str]) -> None:
    parser, args = parser_for(command)
    if args == ["--help"]:
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args(args)
        assert exit_.value.code == 0
    else:
        parser.parse_args(args)


def test_scripts_sandbox_ends_with_the_summary_table() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "sandbox"), "--jobs", "2", "--duration", "5", "--max-runners", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gha-sandbox summary" in done.stdout
    assert "│ jobs done / failed / lost" in done.stdout
    # Requests counted at the API server, split by identity (controller / listener).
    assert "│   of which controller / listener" in done.stdout
    assert done.stdout.splitlines()[-1] == "result: ok"
