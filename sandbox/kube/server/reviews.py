"""The virtual kinds that answer a POST without storing anything: TokenRequest, TokenReview,
SelfSubjectReview and the access and rules reviews."""

from __future__ import annotations

import datetime as dt

from aiohttp import web

from sandbox.kube.clock import timestamp
from sandbox.kube.rbac import Attributes, Authorizer, Tokens, User, service_account_user
from sandbox.kube.registry import Registry
from sandbox.kube.resources import ResourceType
from sandbox.kube.server.paths import RequestInfo
from sandbox.kube.server.wire import Obj, json_response, read_body
from sandbox.kube.status import Cause, bad_request, invalid

DEFAULT_TOKEN_SECONDS = 3600
MIN_TOKEN_SECONDS = 600
MAX_TOKEN_SECONDS = 2**32
"""TokenRequest's bounds (apiserver validation; no --service-account-max-token-expiration)."""


class Reviews:
    def __init__(self, *, registry: Registry, tokens: Tokens, authorizer: Authorizer) -> None:
        self.registry = registry
        self.tokens = tokens
        self.authorizer = authorizer

    async def token_request(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo
    ) -> web.Response:
        """serviceaccounts/token: a token for the ServiceAccount."""
        sa = self.registry.get(rt, ns=info.namespace, name=info.name)
        body = await read_body(request)
        spec = (body or {}).get("spec") or {}
        seconds = int(spec.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS)
        if not MIN_TOKEN_SECONDS <= seconds <= MAX_TOKEN_SECONDS:
            too = (
                "less than 10 minutes"
                if seconds < MIN_TOKEN_SECONDS
                else "larger than 2^32 seconds"
            )
            # The real message names no object: `TokenRequest.authentication.k8s.io "" is invalid`.
            raise invalid(
                "TokenRequest",
                group="authentication.k8s.io",
                name="",
                causes=[
                    Cause(
                        "FieldValueInvalid",
                        field="spec.expirationSeconds",
                        detail=f"{seconds}: may not specify a duration {too}",
                    )
                ],
            )
        expires = self.registry.clock() + dt.timedelta(seconds=seconds)
        token = self.tokens.issue(
            service_account_user(info.namespace, info.name, uid=sa["metadata"]["uid"]),
            expires=expires,
        )
        return json_response(
            {
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {
                    "name": info.name,
                    "namespace": info.namespace,
                    "creationTimestamp": None,
                },
                "spec": {
                    "audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                    "expirationSeconds": seconds,
                    "boundObjectRef": spec.get("boundObjectRef"),
                },
                "status": {"token": token, "expirationTimestamp": timestamp(expires)},
            },
            201,
        )

    async def review(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo, user: User
    ) -> web.Response:
        body = await read_body(request)
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        spec = body.get("spec") or {}
        out: Obj = {
            "kind": rt.kind,
            "apiVersion": rt.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
        }
        if rt.plural == "tokenreviews":
            found = self.tokens.lookup(str(spec.get("token", "")))
            out["status"] = (
                {
                    "authenticated": True,
                    "user": found.info(),
                    "audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                }
                if found
                else {"authenticated": False}
            )
            return json_response(out, 201)
        if rt.plural == "selfsubjectreviews":
            out["status"] = {"userInfo": user.info()}
            return json_response(out, 201)
        if rt.plural == "selfsubjectrulesreviews":
            res, non = self.authorizer.rules_for(user, str(spec.get("namespace", "")))
            out["status"] = {"resourceRules": res, "nonResourceRules": non, "incomplete": False}
            return json_response(out, 201)
        subject = user
        if rt.plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
            if not spec.get("user") and not spec.get("groups"):
                raise bad_request("at least one of user or group must be specified")
            subject = User(
                str(spec.get("user", "")), tuple(spec.get("groups") or ()), str(spec.get("uid", ""))
            )
        ra = spec.get("resourceAttributes")
        nra = spec.get("nonResourceAttributes")
        if rt.plural == "localsubjectaccessreviews":
            if ra is None or ra.get("namespace", info.namespace) != info.namespace:
                raise bad_request("spec.resourceAttributes.namespace must match the namespace")
            body.setdefault("metadata", {})["namespace"] = info.namespace
        if ra is not None:
            attrs = Attributes(
                subject,
                str(ra.get("verb", "")),
                str(ra.get("namespace", "")),
                str(ra.get("group", "")),
                str(ra.get("resource", "")),
                str(ra.get("subresource", "")),
                str(ra.get("name", "")),
            )
        elif nra is not None:
            attrs = Attributes(subject, str(nra.get("verb", "")), path=str(nra.get("path", "")))
        else:
            raise bad_request(
                "exactly one of nonResourceAttributes or resourceAttributes must be specified"
            )
        allowed, reason = self.authorizer.authorize(attrs)
        out["status"] = {"allowed": allowed}
        if reason:
            out["status"]["reason"] = reason
        if rt.plural != "selfsubjectaccessreviews":
            out["metadata"] = body.get("metadata") or {"creationTimestamp": None}
        return json_response(out, 201)
