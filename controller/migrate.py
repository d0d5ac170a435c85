"""`gha-controller migrate-from-arc`: hand a cluster over from ARC's controller without stranding
ARC's objects (docs/install.md, "Moving over from ARC").

Run once, after ARC's controller is stopped and before this project's listeners start. It
1. deletes each AutoscalingListener and what ARC's listener finalizer would have deleted (its
   pods, and its Role and RoleBinding in the runner namespace), removes that finalizer, and waits
   until the pods are gone, so that their message sessions are released;
2. removes `actions.github.com/cleanup-protection` from the Helm-made objects each
   AutoscalingRunnerSet names in its `actions.github.com/cleanup-*` annotations, and ARC's
   finalizer from the set, so that `helm uninstall` can delete them;
3. keeps each EphemeralRunnerSet and its runners: drops the set's owner reference to the
   AutoscalingRunnerSet (deleting that no longer cascades to the runners), and marks what the
   runners use `helm.sh/resource-policy: keep` so that `helm uninstall` leaves it: the GitHub
   Secret (registration) and the runner pods' ServiceAccount with its Role and RoleBinding. The
   manager Role and RoleBinding, which only ARC's controller used, go with Helm.

With `--keep-helm-release` it does step 1 only: the AutoscalingRunnerSets stay with their Helm
releases, and this controller adopts their runner sets in place (docs/install.md, "Keeping ARC's
Helm release"). Either way a listener in this controller's namespace (`--controller-namespace`)
is its own and is left alone.

With `--back` it hands the cluster back to a released ARC (docs/install.md, "Going back to ARC"):
run after this controller is stopped and before ARC's starts again, it deletes this controller's
listeners (in `--controller-namespace`) as step 1 does ARC's, and gives each EphemeralRunnerSet
the finalizer released ARC removes from runner sets (`ephemeralrunner.actions.github.com/
finalizer`) in place of this controller's, which ARC 0.9-0.14.2 do not know: without that, a set
ARC deletes stays Terminating, and so does its AutoscalingRunnerSet. It also removes the
protection finalizer from each runner namespace's RoleBinding `gha-controller`, so that removing
this controller's RBAC leaves nothing Terminating. It refuses (exit 1) while this controller
holds its Lease (`--lease-name`): a running controller would undo it.

Without `--apply` it only prints the plan. A write that replaces a list (finalizers, owner
references) carries the resourceVersion it was planned on, and a delete the uid, so an object
changed in between fails the run instead of being overwritten; run it again.

Exit codes: 0 done, 1 a write or the wait failed, 2 bad arguments or kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NoReturn

from controller.commands import user_api
from controller.runnernamespace import PROTECTION_FINALIZER, ROLE_NAME
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    CLEANUP_TARGETS,
    EPHEMERAL_RUNNER_SET,
)
from shared.api.names import (
    ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME,
    ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME,
    FINALIZER_AUTOSCALING_LISTENER,
    FINALIZER_AUTOSCALING_RUNNER_SET,
    FINALIZER_CLEANUP_PROTECTION,
    FINALIZER_EPHEMERAL_RUNNER_SET,
    FINALIZER_EPHEMERAL_RUNNER_SET_LEGACY,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
)
from shared.kube.errors import KubeError, NotFound
from shared.kube.objects import LEASE, POD, ROLE, ROLE_BINDING, Kind, Objects
from shared.kube.views import parse_time
from shared.typedefs import JSONDict

PROG = "gha-controller migrate-from-arc"
CONTROLLER_NAMESPACE = "gha-runner-scaler-system"
"""Where manifests/ installs this controller; its own listeners there are never ARC's."""
HELM_RESOURCE_POLICY = "helm.sh/resource-policy"
"""Helm leaves an object with this annotation set to `keep` in place on `helm uninstall`."""

LEASE_NAME = "gha-runner-scale-set-controller"
"""The Lease this controller's leader holds (`--lease-name`'s default), in its namespace."""

WATCH_SECONDS = 60
"""timeoutSeconds of each watch while waiting for a pod to go; the wait re-lists after it."""

RUNNERS_NEED = frozenset(
    {
        ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME,
        ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME,
        ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME,
        ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME,
        ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    }
)
"""The Helm-made objects the runners keep using: their pods' ServiceAccount (and its Role and
RoleBinding in kubernetes mode) and the GitHub Secret."""


class UsageError(Exception):
    """Bad arguments; the message says what to fix, in one line."""


class WaitTimeout(Exception):
    """An object was still there when the wait ran out."""


class ControllerRunning(Exception):
    """`--back` found this controller holding its Lease: it would undo the hand-back."""


@dataclass(frozen=True, slots=True)
class Step:
    """One change: what it does, in words, and the call that does it."""

    text: str
    run: Callable[[], Awaitable[object]]


def _ref(kind: Kind, obj: JSONDict) -> str:
    meta = obj["metadata"]
    return f"{kind.kind.lower()} {meta['namespace']}/{meta['name']}"


class Planner:
    def __init__(
        self,
        objects: Objects,
        *,
        timeout: float,
        keep_helm_release: bool = False,
        back: bool = False,
        controller_namespace: str = CONTROLLER_NAMESPACE,
        lease_name: str = LEASE_NAME,
    ) -> None:
        self._lease_name = lease_name
        self._objects = objects
        self._timeout = timeout
        self._keep_helm_release = keep_helm_release
        self._back = back
        self._controller_namespace = controller_namespace

    async def plan(self) -> list[Step]:
        """Every step, listeners first: their pods must be gone before anything else moves.
        Listeners in this controller's namespace are its own and stay. With
        `keep_helm_release` only the listeners go: the AutoscalingRunnerSets stay with their
        Helm release and this controller adopts them."""
        if self._back:
            await self._check_stopped()
        steps: list[Step] = []
        for listener in await self._all(AUTOSCALING_LISTENER):
            ours = listener["metadata"]["namespace"] == self._controller_namespace
            if ours == self._back:
                steps += await self._listener(listener)
        if self._back:
            for runner_set in await self._all(EPHEMERAL_RUNNER_SET):
                steps += self._arcs_finalizer(runner_set)
            for binding in await self._all(ROLE_BINDING):
                if binding["metadata"]["name"] == ROLE_NAME:
                    steps += self._drop_finalizer(ROLE_BINDING, binding, PROTECTION_FINALIZER)
            return steps
        if self._keep_helm_release:
            return steps
        for scale_set in await self._all(AUTOSCALING_RUNNER_SET):
            steps += await self._scale_set(scale_set)
        return steps

    async def _all(self, kind: Kind) -> list[JSONDict]:
        return list((await self._objects.list(kind, None)).get("items") or [])

    async def _listener(self, listener: JSONDict) -> list[Step]:
        meta = listener["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        steps = self._drop_finalizer(AUTOSCALING_LISTENER, listener, FINALIZER_AUTOSCALING_LISTENER)
        if not meta.get("deletionTimestamp"):
            steps.append(self._delete(AUTOSCALING_LISTENER, listener))
        runner_namespace = (listener.get("spec") or {}).get("autoscalingRunnerSetNamespace")
        for kind in (ROLE_BINDING, ROLE):
            rbac = await self._get(kind, str(runner_namespace or ""), name)
            labels = (rbac or {}).get("metadata", {}).get("labels") or {}
            if rbac is not None and (
                labels.get(LABEL_LISTENER_NAME),
                labels.get(LABEL_LISTENER_NAMESPACE),
            ) == (name, namespace):
                steps.append(self._delete(kind, rbac))
        for pod in (await self._objects.list(POD, namespace)).get("items") or []:
            if not any(
                o.get("uid") == meta["uid"] for o in pod["metadata"].get("ownerReferences") or []
            ):
                continue
            if not pod["metadata"].get("deletionTimestamp"):
                steps.append(self._delete(POD, pod))
            steps.append(Step(f"wait until {_ref(POD, pod)} is gone", self._gone(POD, pod)))
        return steps

    async def _scale_set(self, scale_set: JSONDict) -> list[Step]:
        meta = scale_set["metadata"]
        namespace = meta["namespace"]
        annotations = meta.get("annotations") or {}
        steps: list[Step] = []
        for key, kind in CLEANUP_TARGETS:
            dependent = await self._get(kind, namespace, str(annotations.get(key) or ""))
            if dependent is None:
                continue
            steps += self._drop_finalizer(kind, dependent, FINALIZER_CLEANUP_PROTECTION)
            dependent_annotations = dependent["metadata"].get("annotations") or {}
            if key in RUNNERS_NEED and dependent_annotations.get(HELM_RESOURCE_POLICY) != "keep":
                steps.append(
                    self._patch(
                        kind,
                        dependent,
                        {"annotations": {HELM_RESOURCE_POLICY: "keep"}},
                        f"annotate {_ref(kind, dependent)} {HELM_RESOURCE_POLICY}=keep",
                        guarded=False,
                    )
                )
        runner_sets = (await self._objects.list(EPHEMERAL_RUNNER_SET, namespace)).get("items") or []
        for runner_set in runner_sets:
            owners = runner_set["metadata"].get("ownerReferences") or []
            kept = [o for o in owners if o.get("uid") != meta["uid"]]
            if len(kept) != len(owners):
                steps.append(
                    self._patch(
                        EPHEMERAL_RUNNER_SET,
                        runner_set,
                        {"ownerReferences": kept or None},
                        f"remove the owner reference to {_ref(AUTOSCALING_RUNNER_SET, scale_set)}"
                        f" from {_ref(EPHEMERAL_RUNNER_SET, runner_set)}",
                    )
                )
        return steps + self._drop_finalizer(
            AUTOSCALING_RUNNER_SET, scale_set, FINALIZER_AUTOSCALING_RUNNER_SET
        )

    async def _check_stopped(self) -> None:
        """A running controller would put its finalizer back on every set and make its listeners
        again: its Lease, held and not expired, says it runs (a stopped one releases it)."""
        lease = await self._get(LEASE, self._controller_namespace, self._lease_name)
        spec = (lease or {}).get("spec") or {}
        holder, renewed = spec.get("holderIdentity"), spec.get("renewTime")
        if not holder or not renewed:
            return
        expires = parse_time(str(renewed)) + timedelta(
            seconds=int(spec.get("leaseDurationSeconds") or 0)
        )
        if expires > datetime.now(UTC):
            raise ControllerRunning(
                f"this controller is running: {holder} holds the Lease "
                f"{self._controller_namespace}/{self._lease_name}; stop it first "
                "(docs/install.md#going-back-to-arc, step 1)"
            )

    def _arcs_finalizer(self, runner_set: JSONDict) -> list[Step]:
        """This controller's finalizer on a runner set replaced by released ARC's. A set being
        deleted may get no new finalizer (the API server refuses it): this controller's goes,
        and ARC's, if the set has it, stays for ARC."""
        meta = runner_set["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER_EPHEMERAL_RUNNER_SET not in finalizers:
            return []
        if meta.get("deletionTimestamp"):
            return self._drop_finalizer(
                EPHEMERAL_RUNNER_SET, runner_set, FINALIZER_EPHEMERAL_RUNNER_SET
            )
        arcs = FINALIZER_EPHEMERAL_RUNNER_SET_LEGACY
        kept = [f for f in finalizers if f not in (FINALIZER_EPHEMERAL_RUNNER_SET, arcs)]
        return [
            self._patch(
                EPHEMERAL_RUNNER_SET,
                runner_set,
                {"finalizers": [*kept, arcs]},
                f"replace finalizer {FINALIZER_EPHEMERAL_RUNNER_SET} with {arcs} on "
                f"{_ref(EPHEMERAL_RUNNER_SET, runner_set)}",
            )
        ]

    async def _get(self, kind: Kind, namespace: str, name: str) -> JSONDict | None:
        if not namespace or not name:
            return None
        try:
            return await self._objects.get(kind, namespace, name)
        except NotFound:
            return None

    def _drop_finalizer(self, kind: Kind, obj: JSONDict, finalizer: str) -> list[Step]:
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if finalizer not in finalizers:
            return []
        rest = [f for f in finalizers if f != finalizer]
        return [
            self._patch(
                kind,
                obj,
                {"finalizers": rest or None},
                f"remove finalizer {finalizer} from {_ref(kind, obj)}",
            )
        ]

    def _patch(
        self, kind: Kind, obj: JSONDict, metadata: JSONDict, text: str, *, guarded: bool = True
    ) -> Step:
        """A merge patch of `metadata`; `guarded`, only of the version the plan saw."""
        meta = obj["metadata"]
        version = {"resourceVersion": meta["resourceVersion"]} if guarded else {}
        body = {"metadata": {**metadata, **version}}
        return Step(text, lambda: self._objects.patch(kind, meta["namespace"], meta["name"], body))

    def _delete(self, kind: Kind, obj: JSONDict) -> Step:
        meta = obj["metadata"]

        async def delete() -> None:
            try:
                await self._objects.delete(kind, meta["namespace"], meta["name"], uid=meta["uid"])
            except NotFound:
                return

        return Step(f"delete {_ref(kind, obj)}", delete)

    def _gone(self, kind: Kind, obj: JSONDict) -> Callable[[], Awaitable[None]]:
        meta = obj["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]

        async def exists() -> str | None:
            """The list's resourceVersion while the object is there, else None."""
            listing = await self._objects.list(
                kind, namespace, field_selector=f"metadata.name={name}"
            )
            items = listing.get("items") or []
            if any(item["metadata"].get("uid") == uid for item in items):
                return str(listing["metadata"]["resourceVersion"])
            return None

        async def wait() -> None:
            try:
                async with asyncio.timeout(self._timeout):
                    while (version := await exists()) is not None:
                        async for event in self._objects.watch(
                            kind,
                            namespace,
                            resource_version=version,
                            timeout_seconds=WATCH_SECONDS,
                            inactivity_timeout=WATCH_SECONDS + 30,
                        ):
                            gone = event.get("object", {}).get("metadata", {}).get("uid") == uid
                            if event.get("type") == "DELETED" and gone:
                                return
            except TimeoutError:
                raise WaitTimeout(
                    f"{_ref(kind, obj)} still exists after {self._timeout:g} s"
                ) from None

        return wait


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog=PROG,
        description="Delete ARC's listeners and remove ARC's finalizers, keeping the runner "
        "sets and their runners; with --back, hand the cluster back to a released ARC. Prints "
        "the plan; changes nothing without --apply.",
    )
    p.add_argument("--apply", action="store_true", help="make the changes (default: dry run)")
    p.add_argument("--kubeconfig", default=None, help="default: KUBECONFIG, then in-cluster")
    p.add_argument("--context", default=None)
    p.add_argument(
        "--keep-helm-release",
        action="store_true",
        help="only delete ARC's listeners (and wait for their pods): the AutoscalingRunnerSets "
        "stay with their Helm releases and this controller adopts them",
    )
    p.add_argument(
        "--back",
        action="store_true",
        help="hand the cluster back to a released ARC: delete this controller's listeners (and "
        "wait for their pods) and give each EphemeralRunnerSet ARC's finalizer in place of this "
        "controller's",
    )
    p.add_argument(
        "--controller-namespace",
        default=CONTROLLER_NAMESPACE,
        help=f"this controller's namespace, whose listeners are left alone (with --back: "
        f"the only ones deleted) "
        f"(default {CONTROLLER_NAMESPACE})",
    )
    p.add_argument(
        "--lease-name",
        default=LEASE_NAME,
        help=f"with --back: the controller's Lease, held while it runs (default {LEASE_NAME})",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for each listener pod to go (default 300)",
    )
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments, or a UsageError that says what to fix."""
    args = _parser().parse_args(list(argv))
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.back and args.keep_helm_release:
        raise UsageError("--back and --keep-helm-release do not go together")
    if args.kubeconfig is not None and not os.path.isfile(args.kubeconfig):
        raise UsageError(f"--kubeconfig {args.kubeconfig} is not a file")
    return args


async def run(args: argparse.Namespace) -> int:
    api = await user_api(PROG, args.kubeconfig, args.context)
    if api is None:
        return 2
    async with api:
        planner = Planner(
            Objects(api),
            timeout=args.timeout,
            keep_helm_release=args.keep_helm_release,
            back=args.back,
            controller_namespace=args.controller_namespace,
            lease_name=args.lease_name,
        )
        try:
            steps = await planner.plan()
            for step in steps:
                if not args.apply:
                    print(f"would {step.text}", flush=True)
                    continue
                await step.run()
                print(step.text, flush=True)
        except (KubeError, WaitTimeout, ControllerRunning) as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 1
    if not steps:
        print(
            "nothing of this controller's to hand back"
            if args.back
            else "nothing of ARC's to migrate"
        )
    elif not args.apply:
        print("dry run: nothing changed; run again with --apply to make these changes")
    return 0


def main(argv: Sequence[str]) -> int:
    try:
        args = parse_args(argv)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(run(args))
