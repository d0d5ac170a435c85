"""Client of GitHub's runner endpoints and the GitHub Actions service (runner scale sets).

Public API (everything else in the package is internal)::

    from shared.actions import ActionsClient, PersonalAccessToken, GitHubApp, SystemInfo

    async with ActionsClient(
        config_url="https://github.com/my-org",          # org, owner/repo or enterprises/<e>
        credentials=PersonalAccessToken(token),  # or GitHubApp(client_id, installation_id, pem)
        system_info=SystemInfo(subsystem="ghalistener", scale_set_id=7),
        root_ca_pem=None,                                 # extra trusted CA(s), PEM
        # proxy: HTTP(S)_PROXY / NO_PROXY from the environment unless ProxySettings(...) given
        # retry=RetryPolicy(...), request_timeout=30.0, long_poll_timeout=120.0, clock=time.time
    ) as client:
        # controller side
        group = await client.get_runner_group_by_name("default")           # RunnerGroup
        found = await client.get_runner_scale_set(runner_group_id=1, name="arc")  # or None
        made = await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
        await client.update_runner_scale_set(made.id, RunnerScaleSet(name="renamed"))
        await client.get_runner_scale_set_by_id(made.id)
        jit = await client.generate_jit_runner_config(made.id, name="runner-1")
        jit.runner.id; jit.encoded_jit_config.get_secret_value()
        await client.get_runner(runner_id); await client.get_runner_by_name("runner-1")
        await client.remove_runner(runner_id)          # JobStillRunning / RunnerNotFound
        await client.delete_runner_scale_set(made.id)
        await client.get_acquirable_jobs(made.id)      # legacy endpoint

        # listener side
        async with await client.open_message_session(made.id, owner=hostname) as session:
            session.session.statistics                                 # Statistics | None
            msg = await session.get_message(last_message_id=0, max_capacity=10)  # None: nothing
            if msg is not None:
                await session.delete_message(msg.message_id)           # ack first
                ids = [j.runner_request_id for j in msg.jobs if isinstance(j, JobAvailable)]
                await session.acquire_jobs(ids)
        # leaving the block deletes the session

Errors are `ActionsError` subclasses (see `shared.actions.errors`), with the aiohttp exception as
`__cause__` and no secret in the message: `SessionConflict` (409 on session create),
`MessageQueueTokenExpired` (401 after one session refresh), `TokenExpired` (admin 401 even
after one renewal), `RunnerNotFound`, `RunnerExists`, `JobStillRunning`, `ScaleSetNotFound`,
`RunnerGroupNotFound`, `SessionNotFound`, `SessionExpired`, `AmbiguousName`,
`AuthenticationFailed` (token chain), `ActionsServerError` / `ActionsConnectionError`
(`retryable`, after the retries), `UnexpectedResponse`, `InvalidArgument` / `InvalidConfigURL` /
`InvalidCredentials` (nothing sent).

Tokens: the admin token is fetched on first use, renewed before any call made within 60 s of its
expiry, and renewed once when a call answers 401 (the call is then repeated once). The
message-queue token is renewed by refreshing the session when a message-queue call answers 401,
and that call is repeated once. See docs/actions-client.md.
"""

from __future__ import annotations

from shared.actions.client import ActionsClient
from shared.actions.config import GitHubConfig, parse_config_url
from shared.actions.credentials import Credentials, GitHubApp, PersonalAccessToken
from shared.actions.errors import (
    ActionsConnectionError,
    ActionsError,
    ActionsServerError,
    AmbiguousName,
    AuthenticationFailed,
    InvalidArgument,
    InvalidConfigURL,
    InvalidCredentials,
    JobStillRunning,
    MessageQueueTokenExpired,
    NotFound,
    RunnerExists,
    RunnerGroupNotFound,
    RunnerNotFound,
    ScaleSetNotFound,
    SessionConflict,
    SessionExpired,
    SessionNotFound,
    TokenExpired,
    UnexpectedResponse,
)
from shared.actions.models import (
    AcquirableJob,
    JitRunnerConfig,
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobMessage,
    JobStarted,
    Label,
    RunnerGroup,
    RunnerReference,
    RunnerScaleSet,
    RunnerScaleSetMessage,
    RunnerScaleSetSession,
    RunnerSetting,
    Statistics,
    decode_job_messages,
)
from shared.actions.session import MessageSession
from shared.actions.transport import ProxySettings, RetryPolicy, SystemInfo

__all__ = [
    "AcquirableJob",
    "ActionsClient",
    "ActionsConnectionError",
    "ActionsError",
    "ActionsServerError",
    "AmbiguousName",
    "AuthenticationFailed",
    "Credentials",
    "GitHubApp",
    "GitHubConfig",
    "InvalidArgument",
    "InvalidConfigURL",
    "InvalidCredentials",
    "JitRunnerConfig",
    "JobAssigned",
    "JobAvailable",
    "JobCompleted",
    "JobMessage",
    "JobStarted",
    "JobStillRunning",
    "Label",
    "MessageQueueTokenExpired",
    "MessageSession",
    "NotFound",
    "PersonalAccessToken",
    "ProxySettings",
    "RetryPolicy",
    "RunnerExists",
    "RunnerGroup",
    "RunnerGroupNotFound",
    "RunnerNotFound",
    "RunnerReference",
    "RunnerScaleSet",
    "RunnerScaleSetMessage",
    "RunnerScaleSetSession",
    "RunnerSetting",
    "ScaleSetNotFound",
    "SessionConflict",
    "SessionExpired",
    "SessionNotFound",
    "Statistics",
    "SystemInfo",
    "TokenExpired",
    "UnexpectedResponse",
    "decode_job_messages",
    "parse_config_url",
]
