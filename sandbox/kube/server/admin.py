"""`/_emulator/...`: fault injection and request accounting over HTTP, for the admin only."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from sandbox.kube.faults import Faults, Requests
from sandbox.kube.rbac import MASTERS, Tokens
from sandbox.kube.server.wire import Obj, error_response, json_response
from sandbox.kube.status import bad_request, unauthorized, unknown_path

ADMIN_PREFIX = "/_emulator"


class Admin:
    def __init__(self, *, tokens: Tokens, faults: Faults, requests: Requests) -> None:
        self.tokens = tokens
        self.faults = faults
        self.requests = requests

    async def handle(self, request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        user = (
            self.tokens.lookup(header[7:].strip()) if header.lower().startswith("bearer ") else None
        )
        if user is None or MASTERS not in user.groups:
            return error_response(unauthorized())
        action = request.path[len(ADMIN_PREFIX) :].strip("/")
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError as exc:
            return error_response(bad_request(f"the body must be JSON: {exc}"))
        if not isinstance(body, dict):
            return error_response(bad_request("the body must be a JSON object"))
        actions: dict[str, Callable[[], None]] = {
            "faults/clear": self.faults.clear,
            "faults/pause": self.faults.pause,
            "faults/resume": self.faults.resume,
            "faults/drop-watches": self.faults.drop_watches,
            "faults/force-gone": self.faults.force_gone,
            "faults/initialized": self.faults.initialized,
            "requests/reset": self.requests.reset,
        }
        result: Obj = {}
        if action in actions:
            actions[action]()
        elif action == "faults":
            result = {
                "rules": [r.to_dict() for r in self.faults.rules],
                "paused": self.faults.paused,
            }
        elif action == "faults/restart":
            seconds = body.get("seconds")
            if seconds is not None and (
                isinstance(seconds, bool) or not isinstance(seconds, int | float)
            ):
                return error_response(bad_request("seconds must be a number"))
            self.faults.restart(seconds)
        elif action == "faults/inject":
            try:
                result = self.faults.inject(**body).to_dict()
            except TypeError as exc:
                return error_response(bad_request(str(exc)))
        elif action == "requests":
            result = {"total": len(self.requests.log), "counts": self.requests.summary()}
        else:
            return error_response(unknown_path())
        return json_response(result)
