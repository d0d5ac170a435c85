"""Settings of the EphemeralRunner and EphemeralRunnerSet reconcilers (environment variables
prefixed `GHA_CONTROLLER_`, e.g. `GHA_CONTROLLER_MAX_POD_FAILURES=8`)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from controller.runners.backoff import FailurePolicy, ReplacementPolicy


class RunnerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GHA_CONTROLLER_", frozen=True)

    max_pod_failures: int = Field(default=5, ge=0)
    """Failed pods an idle runner may have before it is marked Failed (ARC: 5, hard-wired; node
    consolidation alone exhausted it for users: docs/reconcilers.md#failed-runners)."""
    pod_failure_backoff_seconds: float = Field(default=5.0, ge=0)
    """Wait before the pod after the first failure; doubles per failure (ARC: 5 s)."""
    pod_failure_backoff_max_seconds: float = Field(default=80.0, ge=0)
    """Cap of that wait (ARC's table ends at 80 s)."""
    pod_start_timeout_seconds: float = Field(default=600.0, ge=0)
    """How long the runner container may wait on its image (ErrImagePull, ImagePullBackOff...)
    or configuration before the pod counts as failed; 0 waits forever (ARC)."""
    failed_runner_replace_delay_seconds: float = Field(default=10.0, ge=0)
    """How long a Failed runner keeps its slot (visible for inspection) before it is replaced;
    ARC never replaces it, so failed runners held capacity forever."""
    failed_runner_replace_delay_max_seconds: float = Field(default=600.0, ge=0)
    """Bound of that delay, which doubles for each failed replacement in a row, so a template
    that cannot work costs one attempt per slot per this many seconds."""
    job_still_running_retry_seconds: float = Field(default=30.0, gt=0)
    """When the service refuses to remove a busy runner, how long until asking again (ARC: 30 s)."""
    registration_removal_timeout_seconds: float = Field(default=0.0, ge=0)
    """How long a deleted runner waits for the service to stop reporting its job before it goes
    without being unregistered; 0 waits as long as it takes (ARC; upstream #4585 proposes a
    timeout)."""
    registration_timeout_seconds: float = Field(default=600.0, ge=0)
    """How long, from its creation, a runner may keep failing to register with an error that
    may pass (5xx, 429, timeout, no connection) before it is marked Failed; 0 retries as long as
    it takes (ARC). An error a human must fix (scale set not found, credentials missing or
    refused) fails the runner at once: docs/reconcilers.md#registration-failures."""
    missing_credentials_removal_timeout_seconds: float = Field(default=120.0, gt=0)
    """How long a deleted runner waits for usable GitHub credentials (its config Secret gone,
    unusable or refused) to unregister itself before its registration finalizer is dropped and
    the runner is left registered on GitHub (reported by an Event and a metric)."""
    quota_retry_seconds: float = Field(default=30.0, gt=0)
    """Retry delay when a pod is refused by a ResourceQuota (ARC: 30 s)."""
    quota_give_up_seconds: float = Field(default=600.0, gt=0)
    """A runner still refused by a quota after this long (from its creation) is deleted."""
    credentials_ttl_seconds: float = Field(default=300.0, gt=0)
    """How long the GitHub config Secret read for an Actions client is trusted."""
    protect_busy_pods: bool = True
    """Annotate a runner's pod `karpenter.sh/do-not-disrupt: "true"` and
    `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` while the runner is `Running`, so
    node consolidation drains idle nodes first (not in ARC: docs/reconcilers.md#busy-pods)."""
    exclude_label_propagation_prefixes: tuple[str, ...] = ()
    """Label key prefixes never copied onto runners (ARC's --exclude-label-propagation-prefix)."""

    def failure_policy(self) -> FailurePolicy:
        return FailurePolicy(
            max_pod_failures=self.max_pod_failures,
            first_backoff=timedelta(seconds=self.pod_failure_backoff_seconds),
            max_backoff=timedelta(seconds=self.pod_failure_backoff_max_seconds),
            start_timeout=timedelta(seconds=self.pod_start_timeout_seconds)
            if self.pod_start_timeout_seconds
            else None,
        )

    def replacement_policy(self) -> ReplacementPolicy:
        return ReplacementPolicy(
            first_delay=timedelta(seconds=self.failed_runner_replace_delay_seconds),
            max_delay=timedelta(seconds=self.failed_runner_replace_delay_max_seconds),
        )
