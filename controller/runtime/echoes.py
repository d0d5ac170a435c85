"""Own writes' echoes: the watch events that only show a controller what its own pass wrote
(docs/controller-runtime.md#own-writes).

A pass that writes an object and then carries on deciding on the server's answer has nothing
left to do when the informer delivers that same version back. A controller that says so
(`Controller(own_writes=...)`) has those events dropped: the runtime records the
resourceVersion of every answer to a write made inside one of its passes, per category, and the
first add or update event of an object carrying a recorded version wakes nothing.

Categories, because reconcilers differ in which of their writes end a pass:
- `STATUS`: the primary object's `/status`;
- `OBJECT`: the primary object itself (finalizers, annotations, spec, and its deletion when
  finalizers hold it: a pass that deletes its own object finalizes it too);
- `CHILDREN`: objects of the kinds it owns (creates, patches, and deletes answered with the
  object: a deletion held by finalizers).

A version written by anyone else, or a later one, still wakes; so does every delete event, and a
pass that raised is requeued by its error anyway. So does an update an informer's list delivers
(`from_list`): it shows every write since the version cached, others' included (a kubelet's
status write made while the watch was down, then this pass's patch of the same pod), not the
one write the pass decided on.
"""

from __future__ import annotations

from collections.abc import Collection
from contextvars import ContextVar
from enum import Enum

from shared.kube.objects import Kind
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict


class OwnWrite(Enum):
    STATUS = "status"
    OBJECT = "object"
    CHILDREN = "children"


# Versions kept per object, and objects kept: an echo that never comes (its event beat the
# answer, or a relist skipped it) is forgotten with its object's delete event, or pushed out.
MAX_VERSIONS = 8
MAX_OBJECTS = 10_000

_Key = tuple[str, str, str, str]


def _key(kind: Kind, obj: JSONDict) -> _Key:
    meta = metadata_of(obj)
    return (kind.api_version, kind.kind, str(meta.get("namespace") or ""), str(meta.get("name")))


class Echoes:
    """One controller's recorded own-write versions."""

    def __init__(
        self, *, primary: Kind | None, children: Collection[Kind], ignore: Collection[OwnWrite]
    ) -> None:
        self._primary = primary
        self._children = frozenset(children)
        self._ignore = frozenset(ignore)
        self._versions: dict[_Key, list[str]] = {}

    def wrote(self, kind: Kind, obj: JSONDict, what: str) -> None:
        if kind == self._primary:
            # A deletion held by finalizers is an `OBJECT` write: the pass that deleted its own
            # object goes on to finalize it.
            category = OwnWrite.STATUS if what == "status" else OwnWrite.OBJECT
        elif kind in self._children:
            category = OwnWrite.CHILDREN
        else:
            return
        version = metadata_of(obj).get("resourceVersion")
        if category not in self._ignore or not version:
            return
        key = _key(kind, obj)
        if key not in self._versions and len(self._versions) >= MAX_OBJECTS:
            del self._versions[next(iter(self._versions))]
        versions = self._versions.setdefault(key, [])
        versions.append(str(version))
        del versions[:-MAX_VERSIONS]

    def is_echo(self, kind: Kind, obj: JSONDict) -> bool:
        """Whether this event shows a version recorded here (then forgotten: it wakes once).
        Never while an informer applies a list (`from_list`)."""
        key = _key(kind, obj)
        versions = self._versions.get(key)
        version = metadata_of(obj).get("resourceVersion")
        if not versions or version not in versions:
            return False
        versions.remove(str(version))
        if not versions:
            del self._versions[key]
        return not from_list.get()

    def forget(self, kind: Kind, obj: JSONDict) -> None:
        self._versions.pop(_key(kind, obj), None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._versions.values())


from_list: ContextVar[bool] = ContextVar("from_list", default=False)
"""True while an informer applies a list to its store (`cache.Informer._list`)."""

# The worker running a pass sets its controller's echoes; the manager's object client reports
# every write's answer here.
current_echoes: ContextVar[Echoes | None] = ContextVar("current_echoes", default=None)


def record_write(kind: Kind, obj: JSONDict, what: str) -> None:
    echoes = current_echoes.get()
    if echoes is not None:
        echoes.wrote(kind, obj, what)
