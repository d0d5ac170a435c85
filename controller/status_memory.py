"""Status values a reconciler wrote that its cache may not show yet.

The informer delivers a reconciler's own status write some time after the write returns, and a
pass that starts in between (woken by another object's event) reads the older status from the
cache. Writing the same values again changes nothing on the server but costs a request, and
under load it happens on most passes. `StatusMemory` remembers, per object, what was written and
what the cache showed before, so such a repeat is recognised: the desired values are the ones
last written, and the cache still shows one of the states this process itself left behind.
A value someone else wrote is corrected on the next pass unless it equals one of those states;
the status fields kept this way (counts, readiness, runner id) are written by no one else.
"""

from __future__ import annotations

from typing import Any

JSONDict = dict[str, Any]

HISTORY = 8


class StatusMemory:
    def __init__(self) -> None:
        self._by_uid: dict[str, tuple[list[JSONDict], JSONDict]] = {}

    def redundant(self, uid: str, *, current: JSONDict, desired: JSONDict) -> bool:
        """Whether writing `desired` (status fields) would repeat this process's last write."""
        seen, last = self._by_uid.get(uid, ([], {}))
        shown = {k: current.get(k) for k in desired}
        return all(last.get(k) == v for k, v in desired.items()) and shown in seen

    def wrote(self, uid: str, *, current: JSONDict, desired: JSONDict) -> None:
        seen, last = self._by_uid.get(uid, ([], {}))
        shown = {k: current.get(k) for k in desired}
        self._by_uid[uid] = ([*seen, shown, dict(desired)][-HISTORY:], {**last, **desired})

    def last(self, uid: str) -> JSONDict:
        """Every status field this process wrote for the object, latest value each."""
        return dict(self._by_uid.get(uid, ([], {}))[1])

    def forget(self, uid: str) -> None:
        self._by_uid.pop(uid, None)
