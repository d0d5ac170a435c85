"""The listener's Kubernetes calls: one EphemeralRunnerSet and the EphemeralRunners it owns.

Exactly what the listener Role allows (manifests/listener/): patch of the one set, get and
patch(/status) of runners, and with a standby (docs/listener.md#standby) get and update of its
Lease (create too when the Lease does not exist yet). Every call gets a timeout (`Objects`) and
a trace span. At start the listener asks the API server whether it holds those permissions (a
SelfSubjectAccessReview each, which every authenticated identity may create) and who it is (a
SelfSubjectReview), so that a missing rule is named before the first job instead of after it
(docs/listener.md, "Permissions").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry.trace import SpanKind, Tracer

from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.api.names import GROUP
from shared.kube.errors import Forbidden, KubeError, NotFound, Unauthorized
from shared.kube.objects import (
    LEASE,
    SELF_SUBJECT_REVIEW,
    Kind,
    Objects,
)
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict


@dataclass(frozen=True, slots=True)
class Permission:
    """One verb on one resource (of ARC's group unless told), in the set's namespace."""

    verb: str
    resource: str
    subresource: str = ""
    name: str = ""
    """Empty: any object of the resource; otherwise the rule must allow this one name."""
    group: str = GROUP

    @property
    def resource_path(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def rule(self) -> str:
        """The Role rule granting it, as it would be written in the Role's YAML."""
        names = f", resourceNames: [{self.name}]" if self.name else ""
        return (
            f"{{apiGroups: [{self.group}], resources: [{self.resource_path}]{names}, "
            f"verbs: [{self.verb}]}}"
        )

    def attributes(self, namespace: str) -> JSONDict:
        """The resource attributes of a review of it in `namespace`."""
        attributes: JSONDict = {
            "namespace": namespace,
            "verb": self.verb,
            "group": self.group,
            "resource": self.resource,
        }
        if self.subresource:
            attributes["subresource"] = self.subresource
        if self.name:
            attributes["name"] = self.name
        return attributes


class MissingPermissions(Exception):
    """The identity lacks a permission the listener needs; the message names the rules."""


class KubernetesAccessLost(KubeError):
    """A call the listener cannot work without was refused for good (401, 403, 404)."""


class RunnerSetClient:
    def __init__(
        self,
        objects: Objects,
        *,
        namespace: str,
        runner_set: str,
        tracer: Tracer,
        lease: str = "",
    ) -> None:
        self._objects = objects
        self.namespace = namespace
        self.runner_set = runner_set
        self._tracer = tracer
        self.identity: str | None = None
        """Who the API server says we are, once `check_access` asked."""
        self.runner_set_uid: str | None = None
        """The set's uid, from the answer to the last successful patch of it."""
        self.set_patch = Permission("patch", EPHEMERAL_RUNNER_SET.plural, name=runner_set)
        self.permissions = (
            Permission("get", EPHEMERAL_RUNNER.plural),
            Permission("patch", EPHEMERAL_RUNNER.plural, subresource="status"),
            self.set_patch,
        )
        """What the listener does: read a runner, patch its status, patch the one set."""
        self.lease = lease
        """The standby Lease's name; empty without a standby."""

    @contextmanager
    def _span(self, verb: str, kind: Kind, *, name: str) -> Iterator[None]:
        with self._tracer.start_as_current_span(
            f"kube {verb} {kind.plural}",
            kind=SpanKind.CLIENT,
            attributes={
                "k8s.namespace.name": self.namespace,
                "k8s.resource": kind.plural,
                "k8s.object.name": name,
            },
        ):
            yield

    async def check_access(self) -> None:
        """Learn the identity, then raise MissingPermissions unless every permission is held.

        Transient errors propagate for the caller to retry.
        """
        self.identity = await self._whoami()
        needed = list(self.permissions)
        if self.lease:
            needed += [
                Permission(verb, LEASE.plural, name=self.lease, group=LEASE.group)
                for verb in ("get", "update")
            ]
            if not await self._lease_exists():
                needed.append(Permission("create", LEASE.plural, group=LEASE.group))
        missing = [permission for permission in needed if not await self._allowed(permission)]
        if missing:
            raise MissingPermissions(self._describe_missing(missing))

    async def _whoami(self) -> str | None:
        body: JSONDict = {
            "apiVersion": SELF_SUBJECT_REVIEW.api_version,
            "kind": SELF_SUBJECT_REVIEW.kind,
        }
        try:
            review = await self._objects.create(SELF_SUBJECT_REVIEW, None, body)
        except NotFound:
            # API servers before 1.28 serve no authentication.k8s.io/v1 SelfSubjectReview.
            return None
        user = review.get("status", {}).get("userInfo", {}).get("username")
        return str(user) if user else None

    async def _lease_exists(self) -> bool:
        """Whether the Lease is there; a Lease it may not read counts as there (the review of
        `get` names that rule)."""
        try:
            await self._objects.get(LEASE, self.namespace, self.lease)
        except NotFound:
            return False
        except Forbidden:
            return True
        return True

    async def _allowed(self, permission: Permission) -> bool:
        return await self._objects.allowed(permission.attributes(self.namespace))

    def _who(self) -> str:
        if self.identity:
            return f'the Kubernetes identity "{self.identity}"'
        return "the listener's Kubernetes identity"

    def _describe_missing(self, missing: list[Permission]) -> str:
        verbs = ", ".join(
            f"{p.verb} {p.resource_path}" + (f' "{p.name}"' if p.name else "") for p in missing
        )
        rules = " and ".join(p.rule() for p in missing)
        return (
            f"{self._who()} may not {verbs} in namespace "
            f'"{self.namespace}", which the listener needs (docs/listener.md#permissions); '
            f"add to its Role: {rules}"
        )

    def set_patch_refused(self, exc: KubeError) -> KubernetesAccessLost:
        """The one line that says why the set patch was refused for good with `exc`."""
        target = f'ephemeralrunnersets "{self.namespace}/{self.runner_set}"'
        if isinstance(exc, Unauthorized):
            why = (
                f"the API server no longer accepts the credentials of {self._who()} "
                "(an expired or revoked token?)"
            )
        elif isinstance(exc, NotFound):
            why = "the EphemeralRunnerSet (or its CRD) does not exist"
        else:
            why = f"{self._who()} lacks the Role rule {self.set_patch.rule()}"
        return KubernetesAccessLost(
            f"Kubernetes refused patch {target}: {why} ({exc})", code=exc.code, reason=exc.reason
        )

    async def patch_runner_set(self, patch: JSONDict) -> JSONDict:
        with self._span("patch", EPHEMERAL_RUNNER_SET, name=self.runner_set):
            updated = await self._objects.patch(
                EPHEMERAL_RUNNER_SET, self.namespace, self.runner_set, patch
            )
        self.runner_set_uid = metadata_of(updated).get("uid") or self.runner_set_uid
        return updated

    async def get_runner(self, name: str) -> JSONDict:
        with self._span("get", EPHEMERAL_RUNNER, name=name):
            return await self._objects.get(EPHEMERAL_RUNNER, self.namespace, name)

    async def patch_runner_status(self, name: str, patch: JSONDict) -> JSONDict:
        with self._span("patch status", EPHEMERAL_RUNNER, name=name):
            return await self._objects.patch(
                EPHEMERAL_RUNNER, self.namespace, name, patch, status=True
            )
