"""kube-controller-manager's tokens controller, simulated (docs/sandbox-kube.md#service-account-
token-secrets): the long-lived ServiceAccount tokens of Secrets of type
`kubernetes.io/service-account-token`.

- A Secret of that type whose `kubernetes.io/service-account.name` annotation names a
  ServiceAccount of its namespace gets `data.token` (a token authenticating as that
  ServiceAccount, without expiry), `data["ca.crt"]`, `data.namespace` and the
  `kubernetes.io/service-account.uid` annotation.
- A Secret naming a ServiceAccount that does not exist, or another one of that name (its uid),
  is deleted; so are the token Secrets of a deleted ServiceAccount.
- A deleted Secret's token stops authenticating at once, which is how such a token is revoked.

It runs as one task fed by the store's event stream, after the write that triggers it, as on a
real cluster: a client waits for `data.token` to appear.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
from typing import Any

from sandbox.kube.rbac import Tokens, service_account_user
from sandbox.kube.registry import Registry
from sandbox.kube.status import ApiError
from sandbox.kube.store import Event, Store, TypeKey

Obj = dict[str, Any]
log = logging.getLogger("sandbox.kube.tokencontroller")

SECRETS: TypeKey = ("", "secrets")
SERVICE_ACCOUNTS: TypeKey = ("", "serviceaccounts")
TOKEN_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class TokenController:
    def __init__(self, *, registry: Registry, store: Store, tokens: Tokens, ca_pem: str) -> None:
        self.registry = registry
        self.store = store
        self.tokens = tokens
        self.ca_pem = ca_pem
        # Secret uid -> the token issued for it.
        self.issued: dict[str, str] = {}

    async def run(self) -> None:
        sub = self.store.subscribe({SECRETS, SERVICE_ACCOUNTS})
        try:
            while True:
                item = await sub.queue.get()
                if item is None:
                    return
                if isinstance(item, Event):
                    try:
                        self.handle(item)
                    except ApiError as exc:
                        log.debug("token controller write failed: %s", exc.message)
        finally:
            self.store.unsubscribe(sub)

    def handle(self, ev: Event) -> None:
        if ev.key == SERVICE_ACCOUNTS:
            if ev.type == "DELETED":
                meta = ev.obj["metadata"]
                self._delete_tokens_of(meta.get("namespace", ""), meta["name"])
            return
        if ev.obj.get("type") != TOKEN_TYPE:
            return
        if ev.type == "DELETED":
            self._revoke(ev.obj["metadata"]["uid"])
            return
        self._fill(ev.obj)

    def _fill(self, secret: Obj) -> None:
        meta = secret["metadata"]
        ns = meta.get("namespace", "")
        annotations = meta.get("annotations") or {}
        account_name = annotations.get(NAME_ANNOTATION, "")
        account = self.store.get(SERVICE_ACCOUNTS, ns, account_name) if account_name else None
        account_uid = account["metadata"]["uid"] if account is not None else ""
        if account is None or annotations.get(UID_ANNOTATION, account_uid) != account_uid:
            self._delete(secret)
            return
        data = secret.get("data") or {}
        token = self.issued.get(meta["uid"])
        if token is not None and data.get("token") == _b64(token):
            return
        if token is not None:
            self._revoke(meta["uid"])
        token = self.tokens.issue(service_account_user(ns, account_name, uid=account_uid))
        self.issued[meta["uid"]] = token
        filled = copy.deepcopy(secret)
        filled["metadata"].setdefault("annotations", {})[UID_ANNOTATION] = account_uid
        filled["data"] = {
            **data,
            "token": _b64(token),
            "ca.crt": _b64(self.ca_pem),
            "namespace": _b64(ns),
        }
        rt = self.registry.catalog.preferred(*SECRETS)
        assert rt is not None
        self.registry.commit(rt, cur=secret, new=filled)

    def _revoke(self, secret_uid: str) -> None:
        token = self.issued.pop(secret_uid, None)
        if token is not None:
            self.tokens.by_token.pop(token, None)

    def _delete_tokens_of(self, ns: str, account_name: str) -> None:
        for secret in list(self.store.items(SECRETS, ns)):
            annotations = secret["metadata"].get("annotations") or {}
            if (
                secret.get("type") == TOKEN_TYPE
                and annotations.get(NAME_ANNOTATION) == account_name
            ):
                self._delete(secret)

    def _delete(self, secret: Obj) -> None:
        meta = secret["metadata"]
        rt = self.registry.catalog.preferred(*SECRETS)
        assert rt is not None
        self._revoke(meta["uid"])
        with contextlib.suppress(ApiError):
            self.registry.delete(
                rt,
                ns=meta.get("namespace", ""),
                name=meta["name"],
                options={"preconditions": {"uid": meta["uid"]}},
            )
