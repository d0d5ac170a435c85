"""Who is asking and may they: client-certificate and bearer-token authentication,
impersonation and RBAC."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sandbox.kube.rbac import MASTERS, Attributes, Authorizer, Tokens, User, user_for_name
from sandbox.kube.server.paths import RequestInfo
from sandbox.kube.status import bad_request, forbidden, forbidden_path, unauthorized

# kube-apiserver's old insecure port served unauthenticated requests as this member of
# system:masters; kubectl sends no bearer token over plain http, so the http mode needs it.
INSECURE_USER = User("system:unsecured", (MASTERS, "system:authenticated"))


class Gate:
    """Authentication, impersonation and authorisation of API requests."""

    def __init__(self, *, tokens: Tokens, authorizer: Authorizer, insecure_admin: bool) -> None:
        self.tokens = tokens
        self.authorizer = authorizer
        self.insecure_admin = insecure_admin

    def authenticate(self, request: web.Request) -> User:
        # kube-apiserver tries x509 before bearer tokens: a verified client certificate wins.
        user = certificate_user(
            request.transport.get_extra_info("peercert") if request.transport else None
        )
        if user is not None:
            return user
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            user = self.tokens.lookup(header[7:].strip())
            if user is not None:
                return user
        elif not header and self.insecure_admin:
            return INSECURE_USER
        raise unauthorized()

    def impersonate(self, request: web.Request, user: User) -> User:
        name = request.headers.get("Impersonate-User")
        groups = request.headers.getall("Impersonate-Group", [])
        if not name and not groups:
            return user
        if not name:
            raise bad_request("requested impersonation of groups without a user")
        parts = name.split(":")
        if name.startswith("system:serviceaccount:") and len(parts) == 4:
            checks = [
                Attributes(
                    user,
                    "impersonate",
                    namespace=parts[2],
                    resource="serviceaccounts",
                    name=parts[3],
                )
            ]
        else:
            checks = [Attributes(user, "impersonate", resource="users", name=name)]
        checks += [Attributes(user, "impersonate", resource="groups", name=g) for g in groups]
        for attrs in checks:
            allowed, _ = self.authorizer.authorize(attrs)
            if not allowed:
                raise forbidden(
                    attrs.resource, group="", name=attrs.name, why=attrs.forbidden_message()
                )
        return user_for_name(name, groups)

    def authorize(self, user: User, info: RequestInfo) -> None:
        if info.resource_request:
            attrs = Attributes(
                user,
                info.verb,
                info.namespace,
                info.group,
                info.resource,
                info.subresource,
                info.name,
            )
        else:
            attrs = Attributes(user, info.verb, path=info.path)
        allowed, _ = self.authorizer.authorize(attrs)
        if allowed:
            return
        if not info.resource_request:
            raise forbidden_path(attrs.forbidden_message())
        raise forbidden(
            info.resource, group=info.group, name=info.name, why=attrs.forbidden_message()
        )


def certificate_user(peercert: Any) -> User | None:
    """The identity of a verified client certificate (ssl's getpeercert() form): the common
    name is the user, each organization a group, as kube-apiserver's x509 authenticator reads
    it. None without a certificate (the TLS layer already rejected unverifiable ones)."""
    if not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                name = value
            elif key == "organizationName":
                groups.append(value)
    if not name:
        return None
    return User(name, (*groups, "system:authenticated"))
