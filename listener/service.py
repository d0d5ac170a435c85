"""The message loop of docs/listener.md, "The loop", made to stay up.

Per session: scale from the session statistics, then long-poll; per message: acknowledge first,
acquire every JobAvailable in one call, record JobStarted on the runners, then publish the desired
count. An empty poll publishes too. Where ARC's listener exits and crash-loops, this one recovers
in process: transient errors are retried with backoff, a session the service lost is re-created
(unacknowledged messages come again, and every step is safe to repeat), a 409 conflict waits for
the old session for a bounded time.

What retrying cannot fix ends the process instead of leaving it up and useless: permissions the
listener lacks stop it at start (`MissingPermissions`), and a set patch refused for good (401,
403, 404) makes `/readyz` fail and then ends `run` with `KubernetesAccessLost`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from opentelemetry.trace import Tracer

from listener.config import ListenerSettings
from listener.health import Progress
from listener.job_started import Outcome, record_job_started
from listener.kube import KubernetesAccessLost, RunnerSetClient
from listener.metrics import ListenerMetrics
from listener.retry import Backoff, Stopping, is_transient, retry_transient
from listener.scaler import Scaler
from listener.standby import SessionHandoff
from listener.timeline import JobClock
from shared.actions.client import ActionsClient
from shared.actions.errors import (
    MessageQueueTokenExpired,
    NotFound,
    ScaleSetNotFound,
    SessionConflict,
    SessionExpired,
    SessionNotFound,
    UnexpectedResponse,
)
from shared.actions.models import (
    JobAvailable,
    JobCompleted,
    JobStarted,
    RunnerScaleSetMessage,
    Statistics,
)
from shared.actions.scalesets import find_or_register
from shared.actions.session import MessageSession
from shared.api import patchid
from shared.api.timeline import LISTENER_STAGES, Timeline
from shared.kube.errors import Forbidden, KubeError, Unauthorized
from shared.kube.errors import NotFound as KubeNotFound
from shared.kube.names import shown
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

T = TypeVar("T")
"""The id ARC uses when no runner group is configured (the group named "default")."""
SESSION_DELETE_TIMEOUT = 30.0

# The service forgot the session (evicted, expired) or no longer accepts its token: a new
# session is the way on.
SESSION_LOST = (NotFound, SessionExpired, MessageQueueTokenExpired)


class SessionLost(Exception):
    """The current message session cannot be used any more."""


class SessionWithoutStatistics(Exception):
    """The service opened a session but sent no statistics with it.

    Publishing from it would mean `min_runners` with patch id 0, which lets the controller scale
    down runners that assigned jobs need; ARC's listener refuses such a session too.
    """


class Listener:
    def __init__(
        self,
        *,
        settings: ListenerSettings,
        actions: ActionsClient,
        kube: RunnerSetClient,
        metrics: ListenerMetrics,
        progress: Progress,
        tracer: Tracer,
        owner: str,
        stop: asyncio.Event,
        handoff: SessionHandoff | None = None,
    ) -> None:
        self.settings = settings
        self.actions = actions
        self.kube = kube
        self.metrics = metrics
        self.progress = progress
        self.tracer = tracer
        self.owner = owner
        self.stop = stop
        self.handoff = handoff
        """With a standby: the previous holder's session to end, and where to record ours."""
        self.scaler = Scaler(
            min_runners=settings.min_runners,
            max_runners=settings.max_runners,
            policy=settings.scaling_policy,
        )
        self.backoff = Backoff(
            initial=settings.retry_initial_seconds, maximum=settings.retry_max_seconds
        )
        self.scale_set_id = settings.runner_scale_set_id
        self.written_scale_set_id: int | None = None
        """The id found or registered by name that the EphemeralRunnerSet last took."""
        self.published: tuple[int, int] | None = None
        """The last state the set was patched with: (replicas, patch id)."""
        self.latest = Statistics()
        self.unrecorded: list[JobStarted] = []
        self.job_clock = JobClock()
        """When each job was offered and its count written (docs/job-timeline.md)."""
        """JobStarted messages acknowledged but not yet written to their runner."""

    async def _retry(
        self,
        operation: Callable[[], Awaitable[T]],
        what: str,
        *,
        retry_on: Callable[[BaseException], bool] = is_transient,
        give_up: Callable[[BaseException, float], bool] | None = None,
    ) -> T:
        return await retry_transient(
            operation,
            what=what,
            backoff=self.backoff,
            stop=self.stop,
            retry_on=retry_on,
            give_up=give_up,
        )

    def _past_two_backoff_caps(self, _exc: BaseException, elapsed: float) -> bool:
        """Whether a Kubernetes write stops retrying in place; the next turn tries it again."""
        return elapsed >= 2 * self.settings.retry_max_seconds

    async def run(self) -> None:
        """Serve until `stop` is set (returns) or an unrecoverable error (raises)."""
        try:
            await self._retry(self.kube.check_access, "Kubernetes permission review")
            if not self.scale_set_id:
                await self._find_or_register_scale_set()
            self.metrics.record_static(
                min_runners=self.settings.min_runners, max_runners=self.settings.max_runners
            )
            while not self.stop.is_set():
                session, statistics = await self._open_session()
                try:
                    await self._serve(session, statistics)
                except SessionLost as lost:
                    log.warning("message session lost, opening a new one: %s", lost.__cause__)
                finally:
                    self.progress.session_closed()
                    await self._close(session)
        except Stopping:
            pass

    async def _find_or_register_scale_set(self) -> None:
        found = await self._scale_set_by_name()
        self.scale_set_id = found
        self.actions.set_system_info(
            dataclasses.replace(self.actions.system_info, scale_set_id=found)
        )

    async def _scale_set_by_name(self) -> int:
        name = self.settings.runner_scale_set_name
        scale_set, created = await find_or_register(
            self.actions,
            name=name,
            runner_group=self.settings.runner_group,
            labels=self.settings.runner_scale_set_labels,
            attempt=self._retry,
        )
        verb = "registered" if created else "using"
        log.info("%s runner scale set %r (id %d)", verb, name, scale_set.id)
        return scale_set.id

    async def _end_previous_session(self) -> None:
        """Delete the session the previous Lease holder left (docs/listener.md#standby)."""
        previous = self.handoff.take_previous_session() if self.handoff else None
        if previous is None:
            return
        try:
            await self._retry(
                lambda: self.actions.delete_session(self.scale_set_id, previous),
                "deleting the previous listener's session",
            )
        except (SessionNotFound, SessionExpired):
            log.info("the previous listener's message session %s is already gone", previous)
        else:
            log.info("deleted the previous listener's message session %s", previous)

    async def _open_session(self) -> tuple[MessageSession, Statistics]:
        timeout = self.settings.session_conflict_timeout_seconds
        await self._end_previous_session()

        def give_up(exc: BaseException, elapsed: float) -> bool:
            return isinstance(exc, SessionConflict) and elapsed >= timeout

        async def open_session() -> MessageSession:
            try:
                return await self.actions.open_message_session(self.scale_set_id, owner=self.owner)
            except ScaleSetNotFound:
                if self.settings.runner_scale_set_id:
                    raise
                # Registered by name here: the set was deleted on the service side, so
                # register it again rather than exit (ARC re-registers since 0.15).
                log.warning("runner scale set %d is gone; looking it up again", self.scale_set_id)
                await self._find_or_register_scale_set()
                return await self.actions.open_message_session(self.scale_set_id, owner=self.owner)

        async def create() -> tuple[MessageSession, Statistics]:
            session = await open_session()
            statistics = session.session.statistics
            if statistics is None:
                await self._close(session)
                raise SessionWithoutStatistics(
                    f"message session {session.session_id} came without statistics; "
                    "refused, nothing published from it"
                )
            return session, statistics

        session, statistics = await self._retry(
            create,
            "message session creation",
            retry_on=lambda exc: (
                is_transient(exc) or isinstance(exc, SessionConflict | SessionWithoutStatistics)
            ),
            give_up=give_up,
        )
        log.info("message session %s open for scale set %d", session.session_id, self.scale_set_id)
        self.progress.session_opened()
        if self.handoff is not None:
            await self.handoff.session_opened(session.session_id)
        return session, statistics

    async def _close(self, session: MessageSession) -> None:
        try:
            await asyncio.wait_for(session.close(), SESSION_DELETE_TIMEOUT)
        except Exception as exc:
            # Best effort: the service expires an abandoned session on its own.
            log.warning("could not delete message session %s: %s", session.session_id, exc)
        else:
            log.info("message session %s deleted", session.session_id)

    async def _serve(self, session: MessageSession, statistics: Statistics) -> None:
        self.latest = statistics
        self.metrics.record_statistics(self.latest)
        await self._publish()
        last_message_id = 0
        while True:
            message = await self._poll(session, last_message_id)
            self.progress.poll_finished()
            if message is None:
                await self._record_and_publish(record=False)
                continue
            last_message_id = message.message_id
            await self._handle(session, message)

    async def _poll(
        self, session: MessageSession, last_message_id: int
    ) -> RunnerScaleSetMessage | None:
        async def get() -> RunnerScaleSetMessage | None:
            poll = asyncio.ensure_future(
                session.get_message(
                    last_message_id=last_message_id, max_capacity=self.settings.max_runners
                )
            )
            stopping = asyncio.ensure_future(self.stop.wait())
            try:
                await asyncio.wait({poll, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
            if not poll.done():
                poll.cancel()
                await asyncio.gather(poll, return_exceptions=True)
                raise Stopping
            return poll.result()

        try:
            return await self._retry(
                get,
                "GET message",
                # An undecodable message cannot be acknowledged or skipped: poll again, and
                # let /readyz report the lack of progress if it keeps coming.
                retry_on=lambda exc: is_transient(exc) or isinstance(exc, UnexpectedResponse),
            )
        except SESSION_LOST as exc:
            raise SessionLost from exc

    async def _handle(self, session: MessageSession, message: RunnerScaleSetMessage) -> None:
        """One batch. A stop requested meanwhile only cuts short a backoff wait: a healthy batch
        is finished before the session is deleted."""
        started = [job for job in message.jobs if isinstance(job, JobStarted)]
        completed = [job for job in message.jobs if isinstance(job, JobCompleted)]
        offered = [job for job in message.jobs if isinstance(job, JobAvailable)]
        self.job_clock.offered(offered)
        available = [job.runner_request_id for job in offered]
        with self.tracer.start_as_current_span(
            "message batch",
            attributes={
                "gha.message_id": message.message_id,
                "gha.jobs.available": len(available),
                "gha.jobs.started": len(started),
                "gha.jobs.completed": len(completed),
            },
        ):
            if message.statistics is not None:
                self.latest = message.statistics
            self.metrics.record_statistics(self.latest)
            lost: SessionLost | None = None
            try:
                await self._retry(lambda: session.delete_message(message.message_id), "ack")
                if available:
                    acquired = await self._retry(
                        lambda: session.acquire_jobs(available), "acquire jobs"
                    )
                    log.info("acquired %d of %d available jobs", len(acquired), len(available))
            except SESSION_LOST as exc:
                # Finish the batch: its JobStarted must not wait for a new session, which
                # would deliver this unacknowledged message again anyway (harmlessly).
                lost = SessionLost()
                lost.__cause__ = exc
            for job in started:
                self.metrics.record_job_started(job)
                self.scaler.job_event()
            self.unrecorded.extend(started)
            for done in completed:
                self.job_clock.forget(done)
                self.metrics.record_job_completed(done)
                self.scaler.job_event()
            last = self.published
            if last is None or patchid.publication_needed(
                completed=bool(completed),
                last=last,
                replicas=self.scaler.replicas(self.latest.total_assigned_jobs),
            ):
                await self._record_and_publish()
            else:
                self._unchanged(last)
                await self._record_unrecorded()
            if lost is not None:
                raise lost

    def _unchanged(self, last: tuple[int, int]) -> None:
        """A batch not published (`patchid.publication_needed`): the count the set holds
        (`last`) covers its offered jobs as far as it can (docs/listener.md, "Replicas and the
        patch id")."""
        replicas, patch_id = last
        self.scaler.unpublished(self.latest.total_assigned_jobs)
        log.debug("not published: replicas=%d under patchID=%d stand", replicas, patch_id)
        self.job_clock.published(
            desired=replicas,
            assigned=self.latest.total_assigned_jobs,
            max_runners=self.settings.max_runners,
        )

    async def _record_and_publish(self, *, record: bool = True) -> None:
        """Write the pending JobStarted messages and publish the desired count side by side.

        The set patch does not wait for the runner writes: a batch with a JobStarted or
        JobCompleted is published with a new patch id, which lets the controller add runners
        but never remove one (docs/listener.md, "Replicas and the patch id"), so a runner whose
        job is not written yet cannot be chosen for scale-down meanwhile.
        """
        recording = asyncio.ensure_future(self._record_unrecorded())
        try:
            await self._publish(record=record)
        except BaseException:
            recording.cancel()
            await asyncio.gather(recording, return_exceptions=True)
            raise
        await recording

    async def _record_unrecorded(self) -> None:
        """Write every pending JobStarted: runners side by side, at most
        `job_started_concurrency` at once, and one runner's messages in their order, so two
        messages for one runner never race. What still fails waits for the next turn."""
        pending, self.unrecorded = self.unrecorded, []
        by_runner: dict[str, list[JobStarted]] = {}
        for job in pending:
            if job.runner_name:
                by_runner.setdefault(job.runner_name, []).append(job)
            else:
                log.warning("JobStarted for job %s names no runner; skipped", job.job_id)
        slots = asyncio.Semaphore(self.settings.job_started_concurrency)
        finished: set[int] = set()
        """id() of each message written or dropped; the rest is kept for the next turn."""

        async def one_runner(name: str, jobs: list[JobStarted]) -> None:
            async with slots:
                for job in jobs:
                    try:
                        await self._record_one(job)
                    except KubeError as exc:
                        if exc.retryable:
                            log.warning("JobStarted for runner %s deferred: %s", name, exc)
                            return
                        log.error("JobStarted for runner %s dropped: %s", name, exc)
                    finished.add(id(job))

        try:
            results = await asyncio.gather(
                *(one_runner(name, jobs) for name, jobs in by_runner.items()),
                return_exceptions=True,
            )
        finally:
            # Back in the order they came, ahead of anything queued meanwhile.
            self.unrecorded = [
                job for job in pending if job.runner_name and id(job) not in finished
            ] + self.unrecorded
        failures = [result for result in results if isinstance(result, BaseException)]
        if any(isinstance(failure, Stopping) for failure in failures):
            raise Stopping
        if failures:
            raise failures[0]

    async def _record_one(self, job: JobStarted) -> None:
        timelines: list[Timeline] = []

        def timeline_of(runner: JSONDict) -> Timeline:
            timelines.append(self.job_clock.timeline(job, runner))
            return timelines[-1]

        outcome = await self._retry(
            functools.partial(
                record_job_started,
                self.kube,
                job,
                conflict_retries=self.settings.job_started_conflict_retries,
                timeline_of=timeline_of,
            ),
            f"JobStarted for runner {job.runner_name}",
            give_up=self._past_two_backoff_caps,
        )
        log.log(
            logging.WARNING if outcome.is_warning else logging.INFO,
            "JobStarted job %s on runner %s: %s",
            job.job_id,
            # Quoted when it is not a name: it may hold anything, a newline included.
            shown(job.runner_name) if outcome is Outcome.INVALID_NAME else job.runner_name,
            outcome.value,
        )
        if timelines and outcome in (Outcome.PROMOTED, Outcome.RECORDED):
            self.metrics.record_stages(timelines[-1])
            timelines[-1].trace_spans(self.tracer, name="job", stages=LISTENER_STAGES)
        self.job_clock.forget(job)

    async def _publish(self, *, record: bool = True) -> None:
        """Patch the EphemeralRunnerSet with the desired count for `self.latest`, and with the
        scale set id when the listener found it by name (docs/listener.md, "The scale set id")."""
        desired = self.scaler.desired(self.latest.total_assigned_jobs)
        # Every time, not once: a manifest applied again puts its own id back into the set.
        scale_set_id = None if self.settings.runner_scale_set_id else self.scale_set_id
        patch = desired.ers_patch(scale_set_id=scale_set_id)
        try:
            await self._retry(
                lambda: self.kube.patch_runner_set(patch),
                "EphemeralRunnerSet patch",
                give_up=self._past_two_backoff_caps,
            )
        except (Unauthorized, Forbidden, KubeNotFound) as exc:
            lost: KubernetesAccessLost = self.kube.set_patch_refused(exc)
            self.progress.failed(str(lost))
            raise lost from exc
        except KubeError as exc:
            self.scaler.publication_failed()
            # What the set holds is not known now: the next batch is published whatever it is.
            self.published = None
            log.error(
                "could not publish replicas=%d patchID=%d: %s",
                desired.replicas,
                desired.patch_id,
                exc,
            )
            return
        log.debug("published replicas=%d patchID=%d", desired.replicas, desired.patch_id)
        self.published = (desired.replicas, desired.patch_id)
        if scale_set_id is not None and scale_set_id != self.written_scale_set_id:
            self.written_scale_set_id = scale_set_id
            log.info(
                "wrote runner scale set id %d into EphemeralRunnerSet %s/%s "
                "(spec.ephemeralRunnerSpec.runnerScaleSetId)",
                scale_set_id,
                self.kube.namespace,
                self.kube.runner_set,
            )
        self.job_clock.published(
            desired=desired.replicas,
            assigned=self.latest.total_assigned_jobs,
            max_runners=self.settings.max_runners,
        )
        if record:
            self.metrics.record_desired(desired.replicas)
