"""JSON merge patches (RFC 7386): the diff between two documents, applying one, and the split of
a patch between an object and its `/status` subresource.

A merge patch replaces lists whole and removes a key with `null`, so `diff(before, after)` is
minimal only at the granularity of object keys: a changed list is sent entire. That is the
semantics a real API server applies to `application/merge-patch+json`, for custom resources and
core kinds alike (strategic merge would union `metadata.finalizers` instead of replacing it).
"""

from __future__ import annotations

import copy
from typing import Any

from shared.typedefs import JSONDict


def diff(before: JSONDict, after: JSONDict) -> JSONDict:
    """The smallest merge patch that turns `before` into `after` (empty when they are equal)."""
    patch: JSONDict = {}
    for key, old in before.items():
        if key not in after:
            patch[key] = None
        elif after[key] != old:
            new = after[key]
            if isinstance(old, dict) and isinstance(new, dict):
                patch[key] = diff(old, new)
            else:
                patch[key] = copy.deepcopy(new)
    for key, new in after.items():
        if key not in before:
            patch[key] = copy.deepcopy(new)
    return patch


def apply(target: Any, patch: Any) -> Any:
    """`target` with `patch` applied, as RFC 7386 section 2 defines it; neither input is changed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: JSONDict = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply(result.get(key), value)
    return result


def split_status(patch: JSONDict) -> tuple[JSONDict, JSONDict]:
    """(main, status): the patch for the object itself and the one for its `/status`.

    With the status subresource enabled the server ignores `status` on the main endpoint and
    everything but `status` on `/status`, so a change to both needs two requests.
    """
    main = {key: value for key, value in patch.items() if key != "status"}
    status = {"status": patch["status"]} if "status" in patch else {}
    return main, status
