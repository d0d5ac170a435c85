"""The labels ARC puts on its controller metrics (`gha_controller_*`): the scale set's `name` and
`namespace`, and `repository`, `organization`, `enterprise` from its `githubConfigUrl`
(docs/metrics.md)."""

from __future__ import annotations

from shared.actions.config import parse_config_url
from shared.actions.errors import InvalidConfigURL


def scale_set_labels(*, name: str, namespace: str, config_url: str) -> dict[str, str]:
    """The labels of one scale set; the URL's parts are empty when it does not parse."""
    try:
        config = parse_config_url(config_url, env={})
        scope = (config.repository, config.organization, config.enterprise)
    except InvalidConfigURL:
        scope = ("", "", "")
    return {
        "name": name,
        "namespace": namespace,
        "repository": scope[0],
        "organization": scope[1],
        "enterprise": scope[2],
    }
