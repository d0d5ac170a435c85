"""Building blocks of the objects both runner reconcilers build: ARC's name hash, the proxy
Secret's name, and label propagation (docs/reconcilers.md#objects: controller-computed labels win
over the user's, and label keys under an excluded prefix are never propagated)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shared.typedefs import JSONDict

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def fnv_hash_string(value: str) -> str:
    """ARC's FNVHashString: FNV-1a 32 as decimal, each digit mapped to a name-safe letter."""
    digest = 0x811C9DC5
    for byte in value.encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(digest))


def proxy_secret_name(*, set_name: str, namespace: str) -> str:
    """The Secret a set's runner pods read their proxy variables from."""
    return f"{set_name}-{fnv_hash_string(namespace)[:8]}-runner-proxy"


def filter_and_merge_labels(
    base: Mapping[str, str] | None,
    overwrite: Mapping[str, str] | None,
    *,
    excluded_prefixes: Sequence[str],
) -> dict[str, str]:
    merged = {**(base or {}), **(overwrite or {})}
    return {k: v for k, v in merged.items() if not k.startswith(tuple(excluded_prefixes))}


def resource_meta(spec: JSONDict, key: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations of a ResourceMeta field (`ephemeralRunnerMetadata`...)."""
    value = spec.get(key) or {}
    return dict(value.get("labels") or {}), dict(value.get("annotations") or {})
