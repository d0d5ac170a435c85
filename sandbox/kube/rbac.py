"""Authentication by bearer token and RBAC authorisation from the stored objects
(docs/sandbox-kube.md#authentication-and-authorisation).

Rule matching follows `pkg/apis/rbac/v1/evaluation_helpers.go`; the members of `system:masters`
bypass RBAC as on a real cluster, and the default ClusterRoles that let every authenticated
identity discover the API and review its own access are seeded at start.
"""

from __future__ import annotations

import datetime as dt
import itertools
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sandbox.kube.clock import Clock, utcnow
from sandbox.kube.store import Store

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
MASTERS = "system:masters"
# kubeadm (1.29+) puts its admin kubeconfig's user in this group, which the bootstrap policy
# (bootstrap.py) binds to cluster-admin.
CLUSTER_ADMINS = "kubeadm:cluster-admins"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def info(self) -> Obj:
        out: Obj = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        return out


def service_account_user(namespace: str, name: str, *, uid: str = "") -> User:
    return User(
        name=f"system:serviceaccount:{namespace}:{name}",
        groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
        uid=uid,
    )


def user_for_name(name: str, groups: list[str]) -> User:
    """The identity an impersonation header names (service accounts get their groups)."""
    if name.startswith("system:serviceaccount:"):
        parts = name.split(":")
        if len(parts) == 4:
            sa = service_account_user(parts[2], parts[3])
            return User(name, tuple(dict.fromkeys([*sa.groups, *groups])))
    return User(name, tuple(dict.fromkeys([*groups, AUTHENTICATED])))


@dataclass
class Tokens:
    """Bearer token to identity; tokens are opaque random strings, never logged. A token issued
    with an expiry (TokenRequest's) stops authenticating then."""

    by_token: dict[str, User] = field(default_factory=dict)
    clock: Clock = utcnow
    expiry: dict[str, dt.datetime] = field(default_factory=dict)

    def issue(self, user: User, *, expires: dt.datetime | None = None) -> str:
        token = secrets.token_urlsafe(32)
        self.by_token[token] = user
        if expires is not None:
            self.expiry[token] = expires
        return token

    def lookup(self, token: str) -> User | None:
        expires = self.expiry.get(token)
        if expires is not None and self.clock() >= expires:
            self.by_token.pop(token, None)
            self.expiry.pop(token, None)
        return self.by_token.get(token)


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks to do (authorizer.Attributes)."""

    user: User
    verb: str
    namespace: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)

    def forbidden_message(self) -> str:
        if not self.resource_request:
            return f'User "{self.user.name}" cannot {self.verb} path "{self.path}"'
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return (
            f'User "{self.user.name}" cannot {self.verb} resource "{res}" in API group '
            f'"{self.group}" {where}'
        )


def _rule_allows(rule: Obj, attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if (
                url == "*"
                or url == attrs.path
                or (url.endswith("*") and attrs.path.startswith(url[:-1]))
            ):
                return True
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    ok = False
    for r in resources:
        if r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}"):
            ok = True
    if not ok:
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: Obj, user: User, *, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


def _describe_subject(subject: Obj, binding_ns: str) -> str:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or binding_ns}"'
    return f'{kind} "{subject.get("name")}"'


class Authorizer:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _role_rules(self, ref: Obj, ns: str) -> list[Obj]:
        kind, name = ref.get("kind"), ref.get("name", "")
        if kind == "ClusterRole":
            role = self.store.get((RBAC, "clusterroles"), "", name)
        elif kind == "Role":
            role = self.store.get((RBAC, "roles"), ns, name)
        else:
            role = None
        return list((role or {}).get("rules") or [])

    def _grants(self, user: User, namespace: str) -> Iterator[tuple[str, Obj, Obj, str]]:
        """(binding description, roleRef, first subject naming `user`, binding namespace) of
        every binding that names the user: ClusterRoleBindings, then RoleBindings of
        `namespace`. A binding's rules are the same whichever subject matched, so one is enough."""
        cluster = self.store.items((RBAC, "clusterrolebindings"))
        local = self.store.items((RBAC, "rolebindings"), namespace) if namespace else iter(())
        for binding in itertools.chain(cluster, local):
            ns = binding["metadata"].get("namespace", "")
            subject = next(
                (
                    s
                    for s in binding.get("subjects") or []
                    if _subject_matches(s, user, binding_ns=ns)
                ),
                None,
            )
            if subject is None:
                continue
            name = binding["metadata"]["name"]
            label = f'RoleBinding "{name}/{ns}"' if ns else f'ClusterRoleBinding "{name}"'
            yield label, binding.get("roleRef") or {}, subject, ns

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """Whether RBAC allows it, and the reason string a SubjectAccessReview reports."""
        if MASTERS in attrs.user.groups:
            return True, ""
        for label, ref, subject, ns in self._grants(attrs.user, attrs.namespace):
            if any(_rule_allows(r, attrs) for r in self._role_rules(ref, ns)):
                return True, (
                    f'RBAC: allowed by {label} of {ref.get("kind")} "{ref.get("name")}" to '
                    f"{_describe_subject(subject, ns)}"
                )
        return False, ""

    def rules_for(self, user: User, namespace: str) -> tuple[list[Obj], list[Obj]]:
        """(resourceRules, nonResourceRules) for a SelfSubjectRulesReview."""
        if MASTERS in user.groups:
            return (
                [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            )
        rules = [
            rule
            for _, ref, _, ns in self._grants(user, namespace)
            for rule in self._role_rules(ref, ns)
        ]
        resource = [
            {k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
            for r in rules
            if r.get("resources")
        ]
        non_resource = [
            {k: r[k] for k in ("verbs", "nonResourceURLs")}
            for r in rules
            if r.get("nonResourceURLs")
        ]
        return resource, non_resource
