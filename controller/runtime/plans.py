"""The plan steps every reconciler's plan may hold, applied through its `Pass` (`p.warn`,
`p.settle`, the finalizer helpers on `p.lazy`): a reconciler's `rules.py` adds its own steps
beside them (docs/architecture.md#adding-a-reconciler)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.typedefs import JSONDict


@dataclass(frozen=True, slots=True)
class AddFinalizer:
    """The reconciler's finalizer goes on its object."""


@dataclass(frozen=True, slots=True)
class RemoveFinalizer:
    """The reconciler's finalizer comes off its object: what it guarded is done."""


@dataclass(frozen=True, slots=True)
class Warn:
    """`Pass.warn(reason, message, subject=, also_on=)`."""

    reason: str
    message: str
    subject: object = None
    also_on: tuple[JSONDict, ...] = field(default=(), repr=False)
    """Also an Event on each (an object a user of this one looks at)."""


@dataclass(frozen=True, slots=True)
class Settle:
    """`Pass.settle(reason, subject=)`: the condition a `Warn` said ended."""

    reason: str
    subject: object = None
