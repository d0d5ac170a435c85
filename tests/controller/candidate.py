"""A `gha-controller` process with a recording controller, for the leader-election tests.

    python -m tests.controller.candidate RECORD_FILE [gha-controller flags...]

It runs the real process entry (`controller.app.run`) with an install function adding one
controller for EphemeralRunners, whose reconcile appends `start` and `end` lines (identity, key,
wall time) to RECORD_FILE and flushes each, so a SIGKILL loses nothing already reconciled.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import TextIO

from controller.app import run
from controller.runtime import Controller, Manager, Request, Result
from controller.settings import parse_settings
from shared.api.kinds import EPHEMERAL_RUNNER


class Recording:
    def __init__(self, identity: str, out: TextIO) -> None:
        self.identity = identity
        self.out = out

    def _write(self, event: str, request: Request) -> None:
        line = {"event": event, "who": self.identity, "key": str(request), "t": time.time()}
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    async def reconcile(self, request: Request) -> Result:
        self._write("start", request)
        await asyncio.sleep(0.02)
        self._write("end", request)
        return Result()


def main() -> int:
    record, argv = sys.argv[1], sys.argv[2:]
    settings = parse_settings(argv, dict(os.environ))
    with open(record, "a", encoding="utf-8") as out:

        def setup(manager: Manager) -> None:
            reconciler = Recording(settings.identity, out)
            manager.add(Controller(name="record", for_=EPHEMERAL_RUNNER, reconciler=reconciler))

        return asyncio.run(run(settings, install=setup))


if __name__ == "__main__":
    sys.exit(main())
