"""The scaling policy's models: the optional `scalingPolicy` of an AutoscalingRunnerSet and the
`scaling_policy` key of a listener's config, validated (what each policy does:
docs/policies.md; how a count is decided from it: shared/policy.py).

pydantic models on shared/api's `WireModel`, since they are part of the custom resource's schema;
the listener imports this module only when its config has a policy (docs/listener.md#memory).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ConfigDict, Field, field_validator, model_validator

from shared.api.base import WireModel

# A Go duration of hours, minutes and seconds, as Kubernetes objects write them ("10h", "1h30m").
_DURATION = re.compile(r"(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?")


def parse_duration(value: str) -> timedelta | None:
    """The time a Go duration such as "10h" or "1h30m" stands for, or None when it is not one."""
    found = _DURATION.fullmatch(value)
    if not value or found is None:
        return None
    hours, minutes, seconds = (int(found[unit] or 0) for unit in "hms")
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


class _PolicyModel(WireModel):
    """A CRD type, and frozen unlike the others: `decide` (shared/policy.py) takes a policy as a
    value."""

    model_config = ConfigDict(frozen=True)


class Schedule(_PolicyModel):
    """A recurring time window that raises minRunners and minIdle while it is open."""

    cron: str = Field(
        description="When the window opens: five cron fields (minute hour day-of-month month "
        "day-of-week) or a macro such as @daily, read in timeZone."
    )
    duration: str = Field(description='How long the window stays open: "10h", "1h30m", "45m".')
    time_zone: str = Field(default="UTC", description="IANA time zone, e.g. Europe/Berlin.")
    min_runners: int | None = Field(
        default=None, ge=0, description="Least runners in total while the window is open."
    )
    min_idle: int | None = Field(
        default=None, ge=0, description="Idle runners on top of the busy ones while open."
    )

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        # Imported only for a schedule: croniter and dateutil are about 0.8 MB of the listener's
        # memory (docs/listener.md#memory).
        from croniter import croniter

        fields = value.split()
        macro = len(fields) == 1 and value.startswith("@")
        # Random ("R") fields would make the window differ between two evaluations.
        if not (macro or len(fields) == 5) or "R" in value or not croniter.is_valid(value):
            raise ValueError(
                f'not a cron expression: "{value}" (five fields: minute hour day-of-month month '
                'day-of-week, e.g. "0 8 * * 1-5", or a macro such as "@daily")'
            )
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        parsed = parse_duration(value)
        if parsed is None or parsed <= timedelta(0):
            raise ValueError(f'not a positive duration: "{value}" (e.g. "10h", "1h30m", "45m")')
        return value

    @field_validator("time_zone")
    @classmethod
    def _time_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f'unknown time zone "{value}" (an IANA name such as "Europe/Berlin" or "UTC")'
            ) from None
        return value

    @model_validator(mode="after")
    def _raises_something(self) -> Schedule:
        if self.min_runners is None and self.min_idle is None:
            raise ValueError("a schedule must set minRunners, minIdle or both")
        return self

    def is_open(self, now: datetime) -> bool:
        """Whether a window of this schedule holds `now` (an aware datetime).

        The window of a start s holds now when s <= now < s + duration, so the first start
        after now - duration decides; the duration is elapsed time, across DST changes too.
        """
        from croniter import croniter

        length = parse_duration(self.duration) or timedelta(0)
        since = (now - length).astimezone(ZoneInfo(self.time_zone))
        start: datetime = croniter(self.cron, since).get_next(datetime)
        return start <= now


class Burst(_PolicyModel):
    """Extra runners when assigned jobs jump, so that the rest of a burst finds runners."""

    threshold: int = Field(
        ge=0,
        description="A rise of assigned jobs between two statistics above this starts a burst.",
    )
    extra_percent: int = Field(
        default=100, ge=0, description="Extra runners as a percentage of the rise, rounded up."
    )
    max_extra: int = Field(ge=0, description="Most extra runners a burst adds.")


class ScalingPolicy(_PolicyModel):
    """Capacity policies on top of minRunners and maxRunners (not in ARC: docs/policies.md)."""

    min_idle: int | None = Field(
        default=None,
        ge=0,
        description="Idle runners kept on top of the busy ones; with it, minRunners is the least "
        "number of runners in total.",
    )
    schedules: list[Schedule] | None = Field(
        default=None, description="Time windows that raise minRunners and minIdle."
    )
    burst: Burst | None = None
    warm_tail_seconds: int | None = Field(
        default=None, ge=0, description="After a burst, how long its highest count is held."
    )
    scale_down_delay_seconds: int | None = Field(
        default=None, ge=0, description="How long a lower count must be asked for before it is."
    )

    @model_validator(mode="after")
    def _tail_needs_burst(self) -> ScalingPolicy:
        if self.warm_tail_seconds and self.burst is None:
            raise ValueError("warmTailSeconds needs burst, which says what a burst is")
        return self

    def to_wire(self) -> dict[str, object]:
        """The JSON object: camelCase keys, no unset field."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def bound_problems(self, *, min_runners: int, max_runners: int) -> list[str]:
        """What in this policy contradicts the bounds, each naming its field (camelCase path)."""
        problems = []
        if self.min_idle is not None and self.min_idle > max_runners:
            problems.append(
                f"minIdle must not be greater than maxRunners ({self.min_idle} > {max_runners})"
            )
        for index, schedule in enumerate(self.schedules or ()):
            for name, value in (
                ("minRunners", schedule.min_runners),
                ("minIdle", schedule.min_idle),
            ):
                if value is not None and value > max_runners:
                    problems.append(
                        f"schedules[{index}].{name} must not be greater than maxRunners "
                        f"({value} > {max_runners})"
                    )
        return problems
