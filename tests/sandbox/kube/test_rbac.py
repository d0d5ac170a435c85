"""Checklist item 12: authentication, RBAC from stored objects, access reviews, TokenRequest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.kube.rbac import AUTHENTICATED
from tests.sandbox.kube.conftest import GROUP, MERGE, VERSION, WIDGETS, status_of, widget

pytestmark = pytest.mark.usefixtures("widgets")
SA = "arc-listener"


@pytest.fixture
def listener_role(kube: KubeEmulator, ns: str) -> None:
    """The worked example of docs/sandbox-kube.md#authentication-and-authorisation: get on
    widgets, resourceNames optional."""
    kube.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": ns}}
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader", "namespace": ns},
            "rules": [
                {"apiGroups": [GROUP], "resources": [WIDGETS], "verbs": ["get"]},
                {
                    "apiGroups": [GROUP],
                    "resources": [WIDGETS],
                    "verbs": ["patch"],
                    "resourceNames": ["r1"],
                },
            ],
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader-binding", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": ns}],
        }
    )


def sar(ns: str, **attrs: str) -> dict[str, Any]:
    resource = {"namespace": ns, "group": GROUP, "resource": WIDGETS, "verb": "get", **attrs}
    return {
        "spec": {
            "user": f"system:serviceaccount:{ns}:{SA}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}"],
            "resourceAttributes": resource,
        }
    }


@pytest.mark.usefixtures("listener_role")
@pytest.mark.parametrize(
    ("attrs", "allowed"),
    [
        ({}, True),
        ({"verb": "list"}, False),
        ({"subresource": "status"}, False),
        ({"namespace": "other"}, False),
        ({"verb": "patch", "name": "r1"}, True),
        ({"verb": "patch", "name": "r2"}, False),
        ({"verb": "patch"}, False),
    ],
)
async def test_subject_access_review(
    kube_api: client.ApiClient, ns: str, attrs: dict[str, str], allowed: bool
) -> None:
    review = await client.AuthorizationV1Api(kube_api).create_subject_access_review(
        sar(ns, **attrs)
    )
    assert review.status.allowed is allowed
    if allowed:
        assert review.status.reason == (
            f'RBAC: allowed by RoleBinding "reader-binding/{ns}" of Role "reader" to '
            f'ServiceAccount "{SA}/{ns}"'
        )


@pytest.mark.usefixtures("listener_role")
async def test_restricted_service_account_gets_403_with_the_real_message(
    sa_api: Callable[[str, str], Any], ns: str
) -> None:
    co = client.CustomObjectsApi(await sa_api(ns, SA))
    with pytest.raises(client.ApiException) as exc:
        await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    assert exc.value.status == 403
    body = status_of(exc.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        f'widgets.test.example.com is forbidden: User "system:serviceaccount:{ns}:{SA}" cannot '
        f'list resource "widgets" in API group "test.example.com" in the namespace "{ns}"'
    )


@pytest.mark.usefixtures("listener_role")
async def test_forbidden_subresource_names_it_in_the_message(
    kube: KubeEmulator, sa_api: Callable[[str, str], Any], ns: str
) -> None:
    kube.apply({**widget("r1"), "metadata": {"name": "r1", "namespace": ns}})
    co = client.CustomObjectsApi(await sa_api(ns, SA))
    with pytest.raises(client.ApiException) as exc:
        await co.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, WIDGETS, "r1", {"status": {}}, _content_type=MERGE
        )
    assert status_of(exc.value)["message"] == (
        f'widgets.test.example.com "r1" is forbidden: User "system:serviceaccount:{ns}:{SA}" '
        f'cannot patch resource "widgets/status" in API group "test.example.com" in the '
        f'namespace "{ns}"'
    )


@pytest.mark.usefixtures("listener_role")
async def test_allowed_service_account_request_succeeds_and_is_accounted(
    kube: KubeEmulator, sa_api: Callable[[str, str], Any], ns: str
) -> None:
    kube.apply({**widget("r1"), "metadata": {"name": "r1", "namespace": ns}})
    co = client.CustomObjectsApi(await sa_api(ns, SA))
    obj = await co.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        WIDGETS,
        "r1",
        {"metadata": {"labels": {"a": "b"}}},
        _content_type=MERGE,
    )
    assert obj["metadata"]["labels"] == {"a": "b"}
    user = f"system:serviceaccount:{ns}:{SA}"
    assert kube.requests.count(verb="patch", resource=WIDGETS, user=user) == 1


async def test_cluster_scope_denial_message(
    kube: KubeEmulator, sa_api: Callable[[str, str], Any], ns: str
) -> None:
    core = client.CoreV1Api(await sa_api(ns, "nobody"))
    with pytest.raises(client.ApiException) as exc:
        await core.list_namespace()
    assert status_of(exc.value)["message"] == (
        f'namespaces is forbidden: User "system:serviceaccount:{ns}:nobody" cannot list '
        'resource "namespaces" in API group "" at the cluster scope'
    )


@pytest.mark.usefixtures("listener_role")
@pytest.mark.parametrize(("verb", "allowed"), [("get", True), ("delete", False)])
async def test_self_subject_access_review_under_impersonation(
    kube_api: client.ApiClient, ns: str, verb: str, allowed: bool
) -> None:
    review = await client.AuthorizationV1Api(kube_api).create_self_subject_access_review(
        {
            "spec": {
                "resourceAttributes": {
                    "namespace": ns,
                    "verb": verb,
                    "group": GROUP,
                    "resource": WIDGETS,
                }
            }
        },
        _headers={"Impersonate-User": f"system:serviceaccount:{ns}:{SA}"},
    )
    assert review.status.allowed is allowed


async def test_non_admin_cannot_impersonate(sa_api: Callable[[str, str], Any], ns: str) -> None:
    core = client.CoreV1Api(await sa_api(ns, "nobody"))
    with pytest.raises(client.ApiException) as exc:
        await core.list_namespaced_pod(ns, _headers={"Impersonate-User": "admin"})
    assert exc.value.status == 403
    assert "cannot impersonate resource" in status_of(exc.value)["message"]


async def test_cluster_role_binding_grants_everywhere(
    kube: KubeEmulator, sa_api: Callable[[str, str], Any], ns: str
) -> None:
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "ns-reader"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}],
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "ns-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "ns-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "ops", "namespace": ns}],
        }
    )
    core = client.CoreV1Api(await sa_api(ns, "ops"))
    listed = await core.list_namespace()
    assert ns in [n.metadata.name for n in listed.items]


async def test_token_request_issues_a_working_token(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    kube.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot", "namespace": ns}}
    )
    issued = await core.create_namespaced_service_account_token(
        "bot", ns, {"spec": {"audiences": ["api"], "expirationSeconds": 600}}
    )
    token = issued.status.token
    auth = client.AuthenticationV1Api(core.api_client)
    review = await auth.create_token_review({"spec": {"token": token}})
    assert review.status.authenticated is True
    assert review.status.user.username == f"system:serviceaccount:{ns}:bot"
    assert f"system:serviceaccounts:{ns}" in review.status.user.groups


async def test_token_request_for_missing_service_account_is_404(
    core: client.CoreV1Api, ns: str
) -> None:
    with pytest.raises(client.ApiException) as exc:
        await core.create_namespaced_service_account_token("ghost", ns, {"spec": {}})
    assert exc.value.status == 404


async def test_unknown_token_is_401(kube: KubeEmulator) -> None:
    async with client.ApiClient(await kube.configuration(token="not-a-token")) as api:
        with pytest.raises(client.ApiException) as exc:
            await client.CoreV1Api(api).list_namespace()
    assert exc.value.status == 401
    assert status_of(exc.value)["reason"] == "Unauthorized"


@pytest.mark.parametrize(("groups", "code"), [([], 200), (["admins"], 403)])
async def test_impersonating_groups_needs_its_own_grant(
    kube: KubeEmulator, sa_api: Callable[[str, str], Any], ns: str, groups: list[str], code: int
) -> None:
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "impersonate-bob"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["users"],
                    "verbs": ["impersonate"],
                    "resourceNames": ["bob"],
                }
            ],
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "impersonate-bob"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "impersonate-bob",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "proxy", "namespace": ns}],
        }
    )
    auth = client.AuthenticationV1Api(await sa_api(ns, "proxy"))
    headers = {"Impersonate-User": "bob"}
    if groups:
        headers["Impersonate-Group"] = groups[0]
    try:
        review = await auth.create_self_subject_review({}, _headers=headers)
        got, user = 200, review.status.user_info.username
    except client.ApiException as exc:
        got, user = exc.status, ""
    assert got == code
    assert user == ("bob" if code == 200 else "")


@pytest.mark.usefixtures("listener_role")
async def test_self_subject_rules_review_lists_each_bound_rule_once(
    kube: KubeEmulator, sa_api: Callable[[str, str], Any], ns: str
) -> None:
    """The non-resource rules are those of the three bootstrap roles a real cluster binds to
    every service account (discovery, public info, service-account issuer discovery)."""
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "node-lister"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "node-lister"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "node-lister",
            },
            # Both subjects name the caller: the binding still grants its rules once.
            "subjects": [
                {"kind": "ServiceAccount", "name": SA, "namespace": ns},
                {"kind": "Group", "name": f"system:serviceaccounts:{ns}"},
            ],
        }
    )
    api = await sa_api(ns, SA)
    review = await client.AuthorizationV1Api(api).create_self_subject_rules_review(
        {"spec": {"namespace": ns}}
    )
    resource = [api.sanitize_for_serialization(r) for r in review.status.resource_rules]
    non_resource = [api.sanitize_for_serialization(r) for r in review.status.non_resource_rules]
    assert resource == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["selfsubjectreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": [GROUP], "resources": [WIDGETS], "verbs": ["get"]},
        {"apiGroups": [GROUP], "resources": [WIDGETS], "verbs": ["patch"], "resourceNames": ["r1"]},
    ]
    # system:discovery, system:public-info-viewer and system:service-account-issuer-discovery,
    # each bound to a group every service account is in, as on a real cluster.
    assert [rule["verbs"] for rule in non_resource] == [["get"], ["get"], ["get"]]
    assert "/apis/*" in non_resource[0]["nonResourceURLs"]
    assert "/version" in non_resource[1]["nonResourceURLs"]
    assert "/openid/v1/jwks" in non_resource[2]["nonResourceURLs"]


@pytest.mark.usefixtures("listener_role")
async def test_a_bindings_role_ref_cannot_change(ns: str, kube_api: client.ApiClient) -> None:
    """As the real server: `roleRef` is immutable (a binding is deleted and made again to point
    it elsewhere), while its subjects may change."""
    rbac = client.RbacAuthorizationV1Api(kube_api)
    with pytest.raises(client.ApiException) as refused:
        await rbac.patch_namespaced_role_binding(
            "reader-binding",
            ns,
            {
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "other",
                }
            },
        )
    assert refused.value.status == 422
    status = status_of(refused.value)
    assert status["details"]["causes"][0]["field"] == "roleRef"
    assert "cannot change roleRef" in status["message"]
    subjects = [{"kind": "ServiceAccount", "name": "other", "namespace": ns}]
    patched = await rbac.patch_namespaced_role_binding("reader-binding", ns, {"subjects": subjects})
    assert patched.subjects[0].name == "other"


@pytest.mark.parametrize(
    ("verb", "path", "allowed"),
    [
        ("get", "/metrics", True),
        ("head", "/metrics", False),
        ("get", "/metrics/extra", False),
        ("get", "/debug/pprof/", False),
        # The bootstrap policy's system:public-info-viewer, as in a real cluster.
        ("get", "/healthz", True),
    ],
)
async def test_token_and_non_resource_reviews_for_a_metrics_scraper(
    kube: KubeEmulator, kube_api: client.ApiClient, ns: str, verb: str, path: str, allowed: bool
) -> None:
    """What an authenticated /metrics asks (shared/metricsauth.py): who a ServiceAccount token
    is, then whether that user may `get` the non-resource URL; RBAC's nonResourceURLs match a
    path exactly (or by a trailing `*`) and the verb is the method in lower case."""
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "prom", "namespace": ns},
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{ns}-metrics-reader"},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{ns}-metrics-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{ns}-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prom", "namespace": ns}],
        }
    )
    token = kube.service_account_token(ns, "prom")
    authn = client.AuthenticationV1Api(kube_api)
    unknown = await authn.create_token_review({"spec": {"token": "not-a-token"}})
    assert not unknown.status.authenticated
    review = await authn.create_token_review({"spec": {"token": token}})
    user = review.status.user
    assert user.username == f"system:serviceaccount:{ns}:prom"
    assert user.groups == ["system:serviceaccounts", f"system:serviceaccounts:{ns}", AUTHENTICATED]
    access = await client.AuthorizationV1Api(kube_api).create_subject_access_review(
        {
            "spec": {
                "user": user.username,
                "groups": user.groups,
                "uid": user.uid,
                "nonResourceAttributes": {"path": path, "verb": verb},
            }
        }
    )
    assert access.status.allowed is allowed
