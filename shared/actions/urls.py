"""URL building shared by the admin and message-queue calls."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

API_VERSION = "6.0-preview"
SCALE_SETS = "_apis/runtime/runnerscalesets"
RUNNERS = "_apis/distributedtask/pools/0/agents"
RUNNER_GROUPS = "_apis/runtime/runnergroups/"
"""The trailing slash before the query is what the Go client sends."""


def with_query(url: str, params: Mapping[str, str]) -> str:
    """`url` with `params` merged into its query, keys sorted (as Go's `url.Values.Encode`)."""
    parts = urlsplit(url)
    merged = dict(parse_qsl(parts.query, keep_blank_values=True))
    merged.update(params)
    return urlunsplit(parts._replace(query=urlencode(sorted(merged.items()))))


def join_url(base: str, path: str) -> str:
    """`path` appended to the path of `base` (query kept), duplicate slashes collapsed; a
    trailing slash on `path` stays."""
    parts = urlsplit(base)
    joined = f"{parts.path.rstrip('/')}/{path.lstrip('/')}"
    while "//" in joined:
        joined = joined.replace("//", "/")
    return urlunsplit(parts._replace(path=joined))
