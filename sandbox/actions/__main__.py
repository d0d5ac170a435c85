"""`python -m sandbox.actions` / `gha-sandbox actions`: serve the emulator until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

from sandbox.actions.emulator import ActionsEmulator


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gha-sandbox actions",
        description="Emulate GitHub's token endpoints and the Actions runner scale set service. "
        "Prints the URL on the first line, then one JSON line of sandbox-only credentials.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=0, help="port (0 picks a free one)")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA")
    parser.add_argument("--ca-file", help="with --tls, write the CA certificate (PEM) to this path")
    parser.add_argument(
        "--long-poll-timeout", type=float, default=50.0, help="seconds GET message is held"
    )
    parser.add_argument(
        "--session-timeout", type=float, default=120.0, help="idle seconds before a session expires"
    )
    parser.add_argument(
        "--direct-assign",
        action="store_true",
        help="assign jobs without JobAvailable/acquirejobs (github.com flow)",
    )
    return parser


async def _serve(args: argparse.Namespace) -> int:
    emulator = ActionsEmulator(
        tls=args.tls,
        host=args.host,
        port=args.port,
        long_poll_timeout=args.long_poll_timeout,
        session_timeout=args.session_timeout,
        require_acquire=not args.direct_assign,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await emulator.start()
    except OSError as exc:
        print(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        if args.ca_file and emulator.ca_pem is not None:
            await asyncio.to_thread(Path(args.ca_file).write_bytes, emulator.ca_pem)
        app = emulator.add_app()
        print(emulator.url, flush=True)
        print(
            json.dumps(
                {
                    "configure_url": emulator.config_url(),
                    "github_token": emulator.add_pat(),
                    "github_app_id": app.app_id,
                    "github_app_installation_id": app.installation_id,
                    "github_app_private_key": app.private_key_pem,
                }
            ),
            flush=True,
        )
        await stop.wait()
    finally:
        await emulator.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.ca_file and not args.tls:
        print("--ca-file needs --tls", file=sys.stderr)
        return 2
    return asyncio.run(_serve(args))


if __name__ == "__main__":
    sys.exit(main())
