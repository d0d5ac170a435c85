"""The GitHub configuration URL: which enterprise, organization or repository, and its REST API."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from shared.actions.errors import InvalidConfigURL

Scope = Literal["enterprise", "organization", "repository"]

FORCE_GHES_ENV = "GITHUB_ACTIONS_FORCE_GHES"

_HOSTED = frozenset({"github.com", "www.github.com", "github.localhost"})


@dataclass(frozen=True, slots=True)
class GitHubConfig:
    """A parsed `githubConfigUrl`: `https://github.com/org`, `.../org/repo`, `.../enterprises/e`."""

    url: str
    """The normalised URL (surrounding slashes trimmed), sent verbatim to runner-registration."""
    scheme: str
    host: str
    """Host with its port, as written (`ghes.corp:8443`)."""
    scope: Scope
    enterprise: str = ""
    organization: str = ""
    repository: str = ""
    is_hosted: bool = True
    """github.com, github.localhost or a GHE.com tenant; False for GitHub Enterprise Server."""

    @property
    def api_base(self) -> str:
        """The REST API root, without a trailing slash."""
        if not self.is_hosted:
            return f"{self.scheme}://{self.host}/api/v3"
        hostname, sep, port = self.host.partition(":")
        if hostname.lower() == "www.github.com":
            hostname = "github.com"
        return f"{self.scheme}://api.{hostname}{sep}{port}"

    @property
    def registration_token_path(self) -> str:
        """REST path that mints a runner registration token for this scope."""
        if self.scope == "enterprise":
            return f"/enterprises/{self.enterprise}/actions/runners/registration-token"
        if self.scope == "repository":
            return (
                f"/repos/{self.organization}/{self.repository}/actions/runners/registration-token"
            )
        return f"/orgs/{self.organization}/actions/runners/registration-token"


def _is_hosted(hostname: str) -> bool:
    return hostname.lower() in _HOSTED or hostname.endswith(".ghe.com")


def parse_config_url(url: str, *, env: Mapping[str, str] | None = None) -> GitHubConfig:
    """Parse a configuration URL; `GITHUB_ACTIONS_FORCE_GHES` in `env` forces the GHES API layout.

    Raises InvalidConfigURL when the URL has no scheme or host, or does not point to exactly an
    enterprise (`/enterprises/<name>`), an organization (`/<org>`) or a repository
    (`/<owner>/<repo>`).
    """
    environment = os.environ if env is None else env
    normalised = url.strip().strip("/")
    try:
        parts = urlsplit(normalised)
        hostname = parts.hostname or ""
    except ValueError as exc:
        raise InvalidConfigURL(f"invalid config URL {normalised!r}: {exc}") from exc
    if parts.scheme not in ("http", "https") or not hostname:
        raise InvalidConfigURL(
            f"invalid config URL {normalised!r}: expected http(s)://host/<org>[/<repo>]"
        )
    path = parts.path.strip("/")
    segments = path.split("/") if path else []
    enterprise = organization = repository = ""
    scope: Scope
    if len(segments) == 1:
        scope, organization = "organization", segments[0]
    elif len(segments) == 2 and all(segments) and segments[0].lower() == "enterprises":
        scope, enterprise = "enterprise", segments[1]
    elif len(segments) == 2 and all(segments):
        scope, organization, repository = "repository", segments[0], segments[1]
    else:
        raise InvalidConfigURL(
            f"invalid config URL {normalised!r}: "
            "it should point to an enterprise, org, or repository"
        )
    return GitHubConfig(
        url=normalised,
        scheme=parts.scheme,
        host=parts.netloc.rpartition("@")[2],
        scope=scope,
        enterprise=enterprise,
        organization=organization,
        repository=repository,
        is_hosted=_is_hosted(hostname) and FORCE_GHES_ENV not in environment,
    )


def _loopback(hostname: str) -> bool:
    if hostname.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def insecure_url_refusal(url: str, *, field: str, allowed: bool, opt_in: str) -> str | None:
    """Why the GitHub URL `url` may not be used, or None.

    A plain `http://` URL would send the PAT or the App's JWT, and every token minted from them,
    in clear; it is refused unless `allowed` (the opt-in named `opt_in`, for a test GitHub
    Enterprise Server) or its host is a loopback address (`localhost`, 127.0.0.0/8, ::1), from
    which nothing crosses a network (docs/security.md#transport). The reason names `field`
    and says how to opt in; it never holds the URL's userinfo.
    """
    try:
        parts = urlsplit(url.strip())
        hostname = parts.hostname or ""
    except ValueError:
        return None  # parse_config_url says what is wrong with it
    if parts.scheme.lower() != "http" or allowed or _loopback(hostname):
        return None
    return (
        f"{field} {parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path} is plain "
        f"http: the GitHub credentials would cross the network in clear; use https, or set "
        f"{opt_in}=true for a test GitHub Enterprise Server"
    )
