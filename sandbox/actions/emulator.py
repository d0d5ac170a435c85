"""`ActionsEmulator`: GitHub's token endpoints and the Actions service on one loopback port."""

from __future__ import annotations

import ssl
from types import TracebackType
from typing import Self

from aiohttp import web

from sandbox import tls
from sandbox.actions.credentials import AppCredentials, CredentialStore
from sandbox.actions.faults import Faults
from sandbox.actions.remote import RUNTIME_PATH, RuntimeSocket
from sandbox.actions.runtime import RunnerRuntime
from sandbox.actions.server import (
    MESSAGE_QUEUE_PATH,
    SERVICE_PREFIX,
    ActionsApp,
    default_workflow_ref,
)
from sandbox.actions.state.service import ServiceState


class ActionsEmulator:
    """An in-process GitHub + Actions service.

    `long_poll_timeout` is how long GET message holds a request before answering 202 (the real
    service: ~50 s). `session_timeout` is how long a session lives without a poll before a new
    one may replace it. `require_acquire=False` assigns jobs straight to the scale set
    (JobAssigned without JobAvailable), as github.com does; True is the GHES flow.
    """

    def __init__(
        self,
        *,
        tls: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        long_poll_timeout: float = 50.0,
        session_timeout: float = 120.0,
        require_acquire: bool = True,
        admin_token_ttl: float = 3600.0,
        message_queue_token_ttl: float = 3600.0,
        seed: int = 0,
    ) -> None:
        self._tls = tls
        self._host = host
        self._port = port
        self.credentials = CredentialStore(
            admin_token_ttl=admin_token_ttl, message_queue_token_ttl=message_queue_token_ttl
        )
        self.state = ServiceState(
            credentials=self.credentials,
            session_timeout=session_timeout,
            require_acquire=require_acquire,
        )
        self.faults = Faults(state=self.state, credentials=self.credentials, seed=seed)
        self.runtime = RunnerRuntime(state=self.state, faults=self.faults)
        self._app = ActionsApp(
            state=self.state,
            credentials=self.credentials,
            faults=self.faults,
            long_poll_timeout=long_poll_timeout,
        )
        self._runner: web.AppRunner | None = None
        self.ca_pem: bytes | None = None
        self.url = ""

    @property
    def long_poll_timeout(self) -> float:
        """How long GET message holds a request before answering 202; settable while running
        (a test that must see which message batch a listener acts on sets it above its own
        deadline, so that no empty poll acts in between)."""
        return self._app.long_poll_timeout

    @long_poll_timeout.setter
    def long_poll_timeout(self, seconds: float) -> None:
        self._app.long_poll_timeout = seconds

    async def start(self) -> None:
        context: ssl.SSLContext | None = None
        if self._tls:
            certificate = tls.generate((self._host, "localhost"))
            self.ca_pem = certificate.ca_pem
            context = certificate.server_context()
        app = self._app.build()
        app.router.add_get(RUNTIME_PATH, RuntimeSocket(self.runtime).handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=context)
        try:
            await site.start()
        except OSError:
            await self._runner.cleanup()
            self._runner = None
            raise
        port = self._runner.addresses[0][1]
        self.url = f"{'https' if self._tls else 'http'}://{self._host}:{port}"
        self.state.service_url = self.url + SERVICE_PREFIX
        self.state.message_queue_url = self.url + MESSAGE_QUEUE_PATH

    async def stop(self) -> None:
        if self._runner is None:
            return
        # Long polls in flight answer 202 at once instead of holding the shutdown.
        self._app.closing = True
        self.state.notify()
        await self._runner.cleanup()
        self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    def config_url(
        self, org: str = "example-org", repo: str | None = None, enterprise: str | None = None
    ) -> str:
        """A GitHub config URL on this host (GHES-shaped: its API is `{url}/api/v3`)."""
        if enterprise is not None:
            return f"{self.url}/enterprises/{enterprise}"
        if repo is not None:
            return f"{self.url}/{org}/{repo}"
        return f"{self.url}/{org}"

    def add_pat(self) -> str:
        return self.credentials.add_pat()

    def add_app(self) -> AppCredentials:
        return self.credentials.add_app()

    def add_runner_group(self, name: str) -> int:
        return self.state.add_runner_group(name)

    def enqueue_job(
        self,
        *,
        labels: list[str],
        duration: float = 0.0,
        result: str = "succeeded",
        repository: str = "owner/repo",
        workflow_ref: str | None = None,
        display_name: str = "build",
        event_name: str = "push",
    ) -> int:
        """Queue a workflow job; returns its runner request id (the id acquirejobs takes)."""
        return self.state.enqueue_job(
            labels=labels,
            duration=duration,
            result=result,
            repository=repository,
            workflow_ref=workflow_ref or default_workflow_ref(repository),
            display_name=display_name,
            event_name=event_name,
        )

    def cancel_job(self, request_id: int) -> None:
        """Cancel as a user would: JobCompleted with result `canceled`; its runner exits 0."""
        self.state.cancel_job(request_id)

    def reoffer_job(self, request_id: int) -> None:
        """The service gives up on an assignment nobody started: JobCompleted `canceled`, then
        the job is offered again (JobAvailable, or JobAssigned in the direct flow); the fourth
        time it stays canceled. ValueError unless the job is assigned and not started."""
        self.state.reoffer_job(request_id)

    def complete_job(self, request_id: int) -> None:
        """End a started job now with its configured result, whatever its duration, so tests
        control when a runner finishes instead of sleeping."""
        if self.state.jobs[request_id].state != "started":
            raise ValueError(f"job {request_id} has not started")
        self.state.finish_job(request_id)

    def deprecate_runner_version(self, deprecated: bool = True) -> None:
        """Simulated runners started from now exit with code 7 (outdated) at once."""
        self.state.runner_version_deprecated = deprecated
        self.state.notify()
