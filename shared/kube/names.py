"""Kubernetes name rules, in apimachinery's words (docs/security.md#names-from-tenants).

A name written by a tenant or carried by a message becomes a segment of a request path; one with
`/`, `%` or `..` in it would make the request address another object, in another namespace. The
rules here are the API server's: a namespace is a DNS-1123 label, most objects are named by a
DNS-1123 subdomain, RBAC objects by any path segment. Each check answers the problems found, in
the messages the server itself gives (`k8s.io/apimachinery/pkg/util/validation`), empty when the
value is a valid name.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Final

LABEL_MAX_LENGTH: Final = 63
SUBDOMAIN_MAX_LENGTH: Final = 253
_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN: Final = rf"{_LABEL}(\.{_LABEL})*"
LABEL_PATTERN: Final = f"^{_LABEL}$"
"""A DNS-1123 label, anchored, as a CRD `pattern` (Go's `$` is the end of the text)."""
SUBDOMAIN_PATTERN: Final = f"^{_SUBDOMAIN}$"
"""A DNS-1123 subdomain, anchored, as a CRD `pattern`."""

_LABEL_RE: Final = re.compile(_LABEL)
_SUBDOMAIN_RE: Final = re.compile(_SUBDOMAIN)

_LABEL_MESSAGE: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    f"used for validation is '{_LABEL}')"
)
_SUBDOMAIN_MESSAGE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_SUBDOMAIN}')"
)


class NameRule(enum.Enum):
    """What a kind's names must be (the API server's rule for that kind)."""

    LABEL = "DNS-1123 label"
    SUBDOMAIN = "DNS-1123 subdomain"
    PATH_SEGMENT = "path segment"


def path_segment_problems(value: str) -> list[str]:
    """apimachinery's `IsValidPathSegmentName`: what keeps a name one segment of a path."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


def name_problems(value: object, rule: NameRule) -> list[str]:
    """Why `value` is not a name under `rule`; empty when it is one."""
    if not isinstance(value, str):
        return ["must be a string"]
    if not value:
        return ["may not be empty"]
    problems = path_segment_problems(value)
    if rule is NameRule.PATH_SEGMENT:
        return problems
    limit, pattern, message = (
        (LABEL_MAX_LENGTH, _LABEL_RE, _LABEL_MESSAGE)
        if rule is NameRule.LABEL
        else (SUBDOMAIN_MAX_LENGTH, _SUBDOMAIN_RE, _SUBDOMAIN_MESSAGE)
    )
    if len(value) > limit:
        problems.append(f"must be no more than {limit} characters")
    if not pattern.fullmatch(value):
        problems.append(message)
    return problems


def shown(value: object) -> str:
    """A name as an error message quotes it: JSON-quoted like the server's, cut short."""
    text = str(value)
    return json.dumps(text if len(text) <= 80 else f"{text[:77]}...")


def field_problem(path: str, value: object, rule: NameRule) -> str | None:
    """One line for a field whose value is not a name, as the API server words a field error
    (`spec.githubConfigSecret: Invalid value: "../x": ...`); None for a valid name."""
    if value is None or value == "":
        return f"{path}: Required value"
    problems = name_problems(value, rule)
    if not problems:
        return None
    return f"{path}: Invalid value: {shown(value)}: {'; '.join(problems)}"
