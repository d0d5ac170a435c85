"""Base classes and scalar types of the wire models.

ARC's JSON is camelCase (`githubConfigUrl`); Python code uses snake_case names. Both spellings
are accepted on input, aliases are always produced on output. Types are strict (a string is not
an integer) because the API server is: a model that coerced `"5"` would accept objects the
server rejects.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, StringConstraints
from pydantic.alias_generators import to_camel

from shared.kube.names import (
    LABEL_MAX_LENGTH,
    LABEL_PATTERN,
    SUBDOMAIN_MAX_LENGTH,
    SUBDOMAIN_PATTERN,
)
from shared.kube.views import format_time


class SchemaFormat:
    """OpenAPI `format` of a field in the generated CRD (ARC marks its int64 fields)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"SchemaFormat({self.name!r})"


def _parse_time(value: object) -> object:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime) and value.tzinfo is None:
        raise ValueError("timestamp needs a time zone (RFC 3339, e.g. 2026-01-02T03:04:05Z)")
    return value


# metav1.Time: RFC 3339 with second precision, always written in UTC with a `Z`.
KubeTime = Annotated[
    datetime,
    BeforeValidator(_parse_time),
    PlainSerializer(format_time, return_type=str, when_used="json"),
    SchemaFormat("date-time"),
]

# Go int64 fields (the CRD says `format: int64`, as controller-gen writes it).
Int64 = Annotated[int, SchemaFormat("int64")]

# The name of an object the controller reads by it (a Secret, a ConfigMap, a set): a DNS-1123
# subdomain, so that the CRD refuses `../../team-b/secrets/x` (docs/security.md#names-from-tenants).
ObjectName = Annotated[
    str, StringConstraints(max_length=SUBDOMAIN_MAX_LENGTH, pattern=SUBDOMAIN_PATTERN)
]
# A namespace: a DNS-1123 label.
NamespaceName = Annotated[
    str, StringConstraints(max_length=LABEL_MAX_LENGTH, pattern=LABEL_PATTERN)
]


class WireModel(BaseModel):
    """An ARC type: unknown fields are an error, as the CRD schema would prune them."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        strict=True,
        extra="forbid",
        # Validators and serializers are built on first use, not when the class is made: a
        # process that imports these types and validates few of them builds only those.
        defer_build=True,
    )

    # Whether the generated CRD keeps fields the model does not name.
    crd_preserve_unknown: ClassVar[bool] = False

    def to_wire(self) -> dict[str, Any]:
        """The JSON object ARC would send: camelCase keys, no unset and no null fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude_none=True)


class EmbeddedModel(WireModel):
    """A Kubernetes type embedded in an ARC type: fields the model does not name are kept."""

    model_config = ConfigDict(extra="allow")


class PreservedModel(EmbeddedModel):
    """An embedded type whose CRD schema keeps unknown fields (the pod spec and what it holds).

    ARC's CRDs spell out the whole PodSpec schema (thousands of lines); ours names the fields
    the controller reads and preserves the rest, so the pod spec is validated by the API server
    when the pod is created rather than when the custom resource is.
    """

    crd_preserve_unknown: ClassVar[bool] = True
