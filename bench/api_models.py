"""Cost of the CRD models: load and dump of ARC-shaped objects, against a dict deep copy.

    .venv/bin/python bench/api_models.py --objects 5000

Tells whether a reconciler can afford to load every object it reads into a model (a cache of
thousands of runners) or should keep dicts on the hot path and load models at the boundary.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from shared.api import parse_resource

FIXTURES = Path(__file__).parents[1] / "tests" / "api" / "fixtures"


def _per_object_us(work: Callable[[], Any], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        work()
    return (time.perf_counter() - start) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5000, help="iterations per measurement")
    args = parser.parse_args()
    print("| object | deep copy of the dict (us) | parse_resource (us) | to_wire (us) |")
    print("|---|---|---|---|")
    for name in ("arc-ephemeralrunner.yaml", "arc-autoscalingrunnerset.yaml"):
        raw = yaml.safe_load((FIXTURES / name).read_text())
        model = parse_resource(raw)
        assert model.to_wire() == raw
        copied = _per_object_us(partial(copy.deepcopy, raw), args.objects)
        parsed = _per_object_us(partial(parse_resource, raw), args.objects)
        dumped = _per_object_us(model.to_wire, args.objects)
        print(f"| {raw['kind']} | {copied:.1f} | {parsed:.1f} | {dumped:.1f} |")


if __name__ == "__main__":
    main()
