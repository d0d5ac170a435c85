"""Loading the ARC-shaped example objects in tests/shared/api/fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    return data


def prune(value: Any, schema: dict[str, Any]) -> Any:
    """What an API server stores of value under a structural schema (unknown fields dropped)."""
    if isinstance(value, dict):
        if "additionalProperties" in schema:
            return {k: prune(v, schema["additionalProperties"]) for k, v in value.items()}
        properties = schema.get("properties", {})
        keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields", False)
        return {
            k: prune(v, properties[k]) if k in properties else v
            for k, v in value.items()
            if k in properties or keep_unknown
        }
    if isinstance(value, list):
        return [prune(v, schema.get("items", {})) for v in value]
    return value


def prune_object(obj: dict[str, Any], schema: dict[str, Any]) -> Any:
    """prune() of a whole object; the API server keeps metadata by its own schema."""
    root = {**schema, "properties": {**schema["properties"], "metadata": {}}}
    return {**prune(obj, root), "metadata": obj["metadata"]}
