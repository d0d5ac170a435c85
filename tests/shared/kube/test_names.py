"""Kubernetes name rules (docs/security.md#names-from-tenants): the validator's table, and the
object client refusing a namespace or name that is not one before any request goes out."""

from __future__ import annotations

import re

import pytest

from sandbox.kube.emulator import KubeEmulator
from shared.kube.errors import InvalidName
from shared.kube.names import (
    LABEL_PATTERN,
    SUBDOMAIN_PATTERN,
    NameRule,
    field_problem,
    name_problems,
)
from shared.kube.objects import ROLE_BINDING, SECRET, Objects

HOSTILE = [
    "../../team-b/secrets/github-config",
    "../team-b",
    "..",
    ".",
    "%2e%2e",
    "%2E%2E%2Fteam-b",
    "a%2Fb",
    "/api/v1/namespaces/team-b/secrets/github-config",
    "a/b",
    "",
]
NOT_DNS = [
    "GitHub-Config",
    "x" * 254,
    "github-config\n",
    "-leading",
    "trailing-",
    "under_score",
    "a..b",
    " spaced",
    "sp ace",
    "ünïcode",
    "a?b",
    "a#b",
]
VALID = [
    "github-config",
    "arc-runner-set-gha-rs-github-secret",
    "arc-runner-set-gha-rs-kube-mode",
    "corp-ca",
    "a",
    "0",
    "a.b.c",
    "x" * 253,
]


@pytest.mark.parametrize("value", HOSTILE + NOT_DNS)
def test_a_subdomain_refuses(value: str) -> None:
    assert name_problems(value, NameRule.SUBDOMAIN)


@pytest.mark.parametrize("value", VALID)
def test_a_subdomain_accepts(value: str) -> None:
    assert name_problems(value, NameRule.SUBDOMAIN) == []


@pytest.mark.parametrize(
    ("value", "valid"),
    [("team-a", True), ("x" * 63, True), ("x" * 64, False), ("a.b", False), ("Team", False)],
)
def test_a_label(value: str, valid: bool) -> None:
    assert (name_problems(value, NameRule.LABEL) == []) is valid


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("..", "may not be '..'"),
        (".", "may not be '.'"),
        ("a/b", "may not contain '/'"),
        ("%2e%2e", "may not contain '%'"),
        ("", "may not be empty"),
        ("system:controller:Foo", None),
    ],
)
def test_a_path_segment_is_apimachinerys(value: str, problem: str | None) -> None:
    problems = name_problems(value, NameRule.PATH_SEGMENT)
    assert problems == ([problem] if problem else [])


def test_a_value_that_is_no_string_is_refused() -> None:
    assert name_problems(7, NameRule.SUBDOMAIN) == ["must be a string"]


def test_a_field_problem_reads_as_the_servers() -> None:
    line = field_problem("spec.githubConfigSecret", "../../x", NameRule.SUBDOMAIN)
    assert line is not None
    assert line.startswith('spec.githubConfigSecret: Invalid value: "../../x": ')
    assert "may not contain '/'" in line
    assert field_problem("spec.githubConfigSecret", None, NameRule.SUBDOMAIN) == (
        "spec.githubConfigSecret: Required value"
    )
    assert field_problem("spec.githubConfigSecret", "ok", NameRule.SUBDOMAIN) is None


@pytest.mark.parametrize("value", HOSTILE + NOT_DNS + VALID)
def test_the_crd_patterns_agree_with_the_rules(value: str) -> None:
    # Go's `$` is the end of the text: Python's `fullmatch` is, `$` before a newline is not.
    subdomain = re.fullmatch(SUBDOMAIN_PATTERN.strip("^$"), value) and len(value) <= 253
    assert bool(subdomain) is (name_problems(value, NameRule.SUBDOMAIN) == [])
    label = re.fullmatch(LABEL_PATTERN.strip("^$"), value) and len(value) <= 63
    assert bool(label) is (name_problems(value, NameRule.LABEL) == [])


@pytest.mark.parametrize("name", [*HOSTILE, "GitHub-Config", "x" * 254])
async def test_the_object_client_sends_no_request_for_a_bad_name(
    kube: KubeEmulator, objects: Objects, ns: str, name: str
) -> None:
    before = len(kube.requests.log)
    for call in (
        objects.get(SECRET, ns, name),
        objects.patch(SECRET, ns, name, {"metadata": {"labels": {"a": "b"}}}),
        objects.delete(SECRET, ns, name),
    ):
        with pytest.raises(InvalidName, match="Secret name"):
            await call
    assert len(kube.requests.log) == before


@pytest.mark.parametrize("namespace", ["../team-b", "team-b/secrets", "%2e%2e", "Team-B", ""])
async def test_the_object_client_sends_no_request_for_a_bad_namespace(
    kube: KubeEmulator, objects: Objects, namespace: str
) -> None:
    before = len(kube.requests.log)
    with pytest.raises(InvalidName, match="Secret namespace"):
        await objects.get(SECRET, namespace, "github-config")
    with pytest.raises(InvalidName, match="Secret namespace"):
        await objects.list(SECRET, namespace)
    assert len(kube.requests.log) == before


async def test_a_valid_name_still_reaches_the_server(
    kube: KubeEmulator, objects: Objects, ns: str
) -> None:
    await objects.create(SECRET, ns, {"metadata": {"name": "github-config"}})
    assert (await objects.get(SECRET, ns, "github-config"))["metadata"]["name"] == "github-config"
    # An RBAC object may carry any path segment as its name, as on a real server.
    binding = {
        "metadata": {"name": "system:Binding"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [],
    }
    await objects.create(ROLE_BINDING, ns, binding)
    assert (await objects.get(ROLE_BINDING, ns, "system:Binding"))["metadata"]["name"]
