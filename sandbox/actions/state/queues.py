"""Message queues: one per scale set, outliving sessions; job events become batched messages."""

from __future__ import annotations

import time
from typing import Any

from sandbox.actions.state.data import ServiceData
from sandbox.actions.state.records import MAX_JOB_MESSAGES_PER_MESSAGE, Job, Message, rfc3339


class Queues:
    def __init__(self, data: ServiceData) -> None:
        self.data = data

    def next_message(self, scale_set_id: int, *, last_message_id: int) -> Message | None:
        """The first unacked message after `last_message_id`, building one from pending
        job messages when none is waiting. Messages up to `last_message_id` count as acked."""
        queue = self.data.queues[scale_set_id]
        for message_id in [m for m in queue.messages if m <= last_message_id]:
            self.ack_message(scale_set_id, message_id)
        waiting = sorted(m for m in queue.messages if m > last_message_id)
        if waiting:
            return self._delivered(queue.messages[waiting[0]])
        if not queue.pending:
            return None
        events = queue.pending[:MAX_JOB_MESSAGES_PER_MESSAGE]
        del queue.pending[:MAX_JOB_MESSAGES_PER_MESSAGE]
        message = Message(self.data.next_message_id, events, self.data.statistics(scale_set_id))
        self.data.next_message_id += 1
        queue.messages[message.id] = message
        return self._delivered(message)

    def _delivered(self, message: Message) -> Message:
        """Stamp the jobs of a message handed to a poll with their first delivery."""
        now = time.time()
        for event in message.events:
            job = self.data.jobs.get(event["runnerRequestId"])
            if job is not None and job.delivered_time is None:
                job.delivered_time = now
        return message

    def ack_message(self, scale_set_id: int, message_id: int) -> None:
        message = self.data.queues[scale_set_id].messages.pop(message_id, None)
        if message is None:
            return
        for event in message.events:
            job = self.data.jobs.get(event["runnerRequestId"])
            if job is not None and event["messageType"] == "JobAvailable":
                job.offer_outstanding = False
        self.data.notify()

    def emit(self, job: Job, message_type: str) -> None:
        if job.scale_set_id is None:
            return
        event: dict[str, Any] = {
            "messageType": message_type,
            "runnerRequestId": job.id,
            "repositoryName": job.repository_name,
            "ownerName": job.owner_name,
            "jobId": job.job_id,
            "jobWorkflowRef": job.workflow_ref,
            "jobDisplayName": job.display_name,
            "workflowRunId": job.workflow_run_id,
            "eventName": job.event_name,
            "requestLabels": job.labels,
            "queueTime": rfc3339(job.queue_time),
            "scaleSetAssignTime": rfc3339(job.scale_set_assign_time),
            "runnerAssignTime": rfc3339(job.runner_assign_time),
            "finishTime": rfc3339(job.finish_time),
        }
        if message_type == "JobAvailable":
            event["acquireJobUrl"] = (
                f"{self.data.service_url}_apis/runtime/runnerscalesets/{job.scale_set_id}/acquirejobs"
            )
            job.offer_outstanding = True
        if message_type in ("JobStarted", "JobCompleted"):
            event["runnerId"] = job.runner_id or 0
            event["runnerName"] = job.runner_name
        if message_type == "JobCompleted":
            event["result"] = job.final_result
        self.data.queues[job.scale_set_id].pending.append(event)
