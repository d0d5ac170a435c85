"""Config URL parsing and the REST API base of each kind of host."""

from __future__ import annotations

import pytest

from shared.actions import InvalidConfigURL, parse_config_url


@pytest.mark.parametrize(
    ("url", "scope", "enterprise", "organization", "repository", "hosted"),
    [
        ("https://github.com/org/repo", "repository", "", "org", "repo", True),
        ("https://github.com/org/repo/", "repository", "", "org", "repo", True),
        ("https://github.com/org", "organization", "", "org", "", True),
        ("https://github.com/enterprises/ent", "enterprise", "ent", "", "", True),
        ("https://github.com/Enterprises/ent", "enterprise", "ent", "", "", True),
        ("https://www.github.com/org", "organization", "", "org", "", True),
        ("http://github.localhost/org", "organization", "", "org", "", True),
        ("https://acme.ghe.com/org/repo", "repository", "", "org", "repo", True),
        ("https://ghes.corp/org", "organization", "", "org", "", False),
        ("https://ghes.corp/enterprises/ent", "enterprise", "ent", "", "", False),
        ("http://127.0.0.1:8080/org/repo", "repository", "", "org", "repo", False),
    ],
)
def test_scope_and_hosting(
    url: str, scope: str, enterprise: str, organization: str, repository: str, hosted: bool
) -> None:
    config = parse_config_url(url, env={})
    assert (config.scope, config.enterprise, config.organization, config.repository) == (
        scope,
        enterprise,
        organization,
        repository,
    )
    assert config.is_hosted is hosted


def test_normalised_url_has_no_trailing_slash() -> None:
    assert parse_config_url("https://github.com/org/repo/", env={}).url == (
        "https://github.com/org/repo"
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com",
        "https://github.com/",
        "https://github.com/org/repo/extra",
        "https://github.com/enterprises/ent/extra",
        "github.com/org",
        "ftp://github.com/org",
        "not a url",
        "",
    ],
)
def test_invalid_url_is_rejected(url: str) -> None:
    with pytest.raises(InvalidConfigURL, match="invalid config URL"):
        parse_config_url(url, env={})


@pytest.mark.parametrize(
    ("url", "api"),
    [
        ("https://github.com/org", "https://api.github.com"),
        ("https://www.github.com/org", "https://api.github.com"),
        ("http://github.localhost/org", "http://api.github.localhost"),
        ("https://acme.ghe.com/org", "https://api.acme.ghe.com"),
        ("https://ghes.corp/org", "https://ghes.corp/api/v3"),
        ("https://ghes.corp:8443/org", "https://ghes.corp:8443/api/v3"),
        ("http://127.0.0.1:9000/org", "http://127.0.0.1:9000/api/v3"),
    ],
)
def test_api_base(url: str, api: str) -> None:
    assert parse_config_url(url, env={}).api_base == api


@pytest.mark.parametrize(
    "url", ["https://github.com/org", "https://acme.ghe.com/org", "https://www.github.com/org"]
)
def test_force_ghes_uses_api_v3(url: str) -> None:
    config = parse_config_url(url, env={"GITHUB_ACTIONS_FORCE_GHES": ""})
    assert not config.is_hosted
    assert config.api_base.endswith("/api/v3")


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("https://github.com/org", "/orgs/org/actions/runners/registration-token"),
        ("https://github.com/o/r", "/repos/o/r/actions/runners/registration-token"),
        ("https://github.com/enterprises/e", "/enterprises/e/actions/runners/registration-token"),
    ],
)
def test_registration_token_path(url: str, path: str) -> None:
    assert parse_config_url(url, env={}).registration_token_path == path
