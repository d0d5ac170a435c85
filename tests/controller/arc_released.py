"""Objects as a released ARC leaves them in a cluster (chart and controller 0.9.3, 0.12.1 and
0.14.2), built by the rules of those tags' own builders as docs/install.md#what-a-released-arc-
leaves records them: the AutoscalingRunnerSet the `gha-runner-scale-set` chart rendered, with the
annotations and finalizer ARC's controller added; the EphemeralRunnerSet ARC's controller made
from it (`generateName: <set>-`, ARC's `runner-spec-hash` digest, the legacy finalizer
`ephemeralrunner.actions.github.com/finalizer`, a controller reference to the set); and ARC's
AutoscalingListener in ARC's namespace under ARC's name, with ARC's listener finalizer. And
`ArcController`: the rules by which a released ARC, back at work, deletes what this controller
leaves (docs/install.md#going-back-to-arc).

The three lines build the runner set alike (the set's labels copied, but for the controller's
`--exclude-label-propagation-prefix`es, none by default); what differs and matters to a takeover
is the listener's name: 0.9.3 and 0.12.1 hash the namespace alone, 0.14.2
`namespace@runnerGroup@githubConfigUrl`.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.runners.objects import fnv_hash_string
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from shared.kube.errors import NotFound
from shared.kube.objects import Kind, Objects
from shared.typedefs import JSONDict

ARC_NAMESPACE = "arc-systems"
FINALIZER_ARS = "autoscalingrunnerset.actions.github.com/finalizer"
FINALIZER_ERS_LEGACY = "ephemeralrunner.actions.github.com/finalizer"
FINALIZER_LISTENER = "autoscalinglistener.actions.github.com/finalizer"
RUNNER_SPEC_HASH = "actions.github.com/runner-spec-hash"
# ARC's digest: the decimal FNV-32 of the spec, spelled in Kubernetes' "safe" alphabet
# (bcdfghjklmnpqrstvwxz2456789), at most ten characters: never 16 hex digits as this project's.
ARC_DIGEST = "5d7c9f8bc4"


@dataclass(frozen=True)
class ChartLine:
    version: str
    listener_hash_of_group_and_url: bool


LINES = {
    "0.9.3": ChartLine("0.9.3", listener_hash_of_group_and_url=False),
    "0.12.1": ChartLine("0.12.1", listener_hash_of_group_and_url=False),
    "0.14.2": ChartLine("0.14.2", listener_hash_of_group_and_url=True),
}
API_VERSION = "actions.github.com/v1alpha1"


def autoscaling_runner_set(
    line: ChartLine,
    *,
    name: str,
    namespace: str,
    config_url: str,
    secret: str,
    scale_set_id: int,
    template: JSONDict,
) -> JSONDict:
    """The chart's set, after ARC's controller registered the scale set and added its
    finalizer (`runnerScaleSetName` written back, the scale set's id, name and group)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/component": "autoscaling-runner-set",
                "app.kubernetes.io/instance": name,
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/name": name,
                "app.kubernetes.io/part-of": "gha-rs",
                "app.kubernetes.io/version": line.version,
                "helm.sh/chart": f"gha-rs-{line.version}",
                "actions.github.com/scale-set-name": name,
                "actions.github.com/scale-set-namespace": namespace,
            },
            "annotations": {
                "meta.helm.sh/release-name": name,
                "meta.helm.sh/release-namespace": namespace,
                "actions.github.com/values-hash": "0f4a1c2e9b7d",
                "runner-scale-set-id": str(scale_set_id),
                "actions.github.com/runner-group-name": "Default",
                "actions.github.com/runner-scale-set-name": name,
            },
            "finalizers": [FINALIZER_ARS],
        },
        "spec": {
            "githubConfigUrl": config_url,
            "githubConfigSecret": secret,
            "runnerScaleSetName": name,
            "maxRunners": 5,
            "minRunners": 0,
            "template": template,
        },
    }


def ephemeral_runner_set(ars: JSONDict) -> JSONDict:
    """What ARC's AutoscalingRunnerSet controller made from `ars` (created: it has a uid)."""
    meta, spec = ars["metadata"], ars["spec"]
    computed = {
        "app.kubernetes.io/part-of": "gha-runner-scale-set",
        "app.kubernetes.io/component": "runner-set",
        "app.kubernetes.io/version": meta["labels"].get("app.kubernetes.io/version", ""),
        "actions.github.com/scale-set-name": meta["name"],
        "actions.github.com/scale-set-namespace": meta["namespace"],
    }
    inherited = dict(meta["labels"])
    return {
        "apiVersion": API_VERSION,
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": {**inherited, **computed},
            "annotations": {
                "actions.github.com/runner-group-name": "Default",
                "actions.github.com/runner-scale-set-name": meta["name"],
                RUNNER_SPEC_HASH: ARC_DIGEST,
            },
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "AutoscalingRunnerSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": [FINALIZER_ERS_LEGACY],
        },
        "spec": {
            "replicas": 0,
            "patchID": 0,
            "ephemeralRunnerSpec": {
                "runnerScaleSetId": int(meta["annotations"]["runner-scale-set-id"]),
                "githubConfigUrl": spec["githubConfigUrl"],
                "githubConfigSecret": spec["githubConfigSecret"],
                **spec["template"],
            },
        },
    }


def listener_name(line: ChartLine, ars: JSONDict) -> str:
    meta, spec = ars["metadata"], ars["spec"]
    key = meta["namespace"]
    if line.listener_hash_of_group_and_url:
        key = f"{key}@{spec.get('runnerGroup') or ''}@{spec['githubConfigUrl']}"
    return f"{meta['name']}-{fnv_hash_string(key)[:8]}-listener"


def autoscaling_listener(line: ChartLine, ars: JSONDict, runner_set: JSONDict) -> JSONDict:
    """ARC's listener for `ars`, in ARC's namespace, driving ARC's runner set."""
    meta, spec = ars["metadata"], ars["spec"]
    return {
        "apiVersion": API_VERSION,
        "kind": "AutoscalingListener",
        "metadata": {
            "name": listener_name(line, ars),
            "namespace": ARC_NAMESPACE,
            "labels": {
                "app.kubernetes.io/component": "runner-scale-set-listener",
                "app.kubernetes.io/part-of": "gha-runner-scale-set",
                "app.kubernetes.io/version": line.version,
                "actions.github.com/scale-set-name": meta["name"],
                "actions.github.com/scale-set-namespace": meta["namespace"],
            },
            "finalizers": [FINALIZER_LISTENER],
        },
        "spec": {
            "githubConfigUrl": spec["githubConfigUrl"],
            "githubConfigSecret": f"{meta['name']}-gha-rs-github-secret",
            "runnerScaleSetId": int(meta["annotations"]["runner-scale-set-id"]),
            "autoscalingRunnerSetNamespace": meta["namespace"],
            "autoscalingRunnerSetName": meta["name"],
            "ephemeralRunnerSetName": runner_set["metadata"]["name"],
            "maxRunners": spec["maxRunners"],
            "minRunners": spec["minRunners"],
            "image": f"ghcr.io/actions/gha-runner-scale-set-controller:{line.version}",
        },
    }


class ArcController:
    """Released ARC's controller back at work (docs/install.md#going-back-to-arc): the rules of
    its AutoscalingRunnerSet, EphemeralRunnerSet and EphemeralRunner reconcilers that decide
    whether what this controller leaves can be deleted, as `gha-runner-scale-set-0.14.2` has
    them (0.9.3 and 0.12.1 alike in these parts):

    - runner sets: only one carrying `FINALIZER_ERS_LEGACY` is acted on; being deleted, its
      runners are deleted (ARC skips a busy one until its job ends; these tests have none busy),
      and once none is left the finalizer goes (a set without it is left
      as it is, deleted or not); not being deleted, the finalizer is added;
    - runners being deleted: both runner finalizers removed (after unregistering, not modelled);
    - an AutoscalingRunnerSet finds its runner sets by controller owner and takes the newest as
      the latest; a latest whose `RUNNER_SPEC_HASH` is not ARC's digest of the set is replaced
      by a new set (`ephemeral_runner_set`), and once the latest matches, the older ones are
      deleted; being deleted, it deletes its listener (in ARC's namespace), then every runner
      set, waits until none is left, and only then drops its finalizer.

    `settle` runs passes over every object until a round changes nothing."""

    def __init__(self, objects: Objects, namespace: str) -> None:
        self.objects = objects
        self.namespace = namespace
        self.created: list[str] = []
        """The runner sets this ARC made, oldest first."""

    async def settle(self, *, rounds: int = 30) -> None:
        for _ in range(rounds):
            if not await self._round():
                return
        raise AssertionError(f"ARC's controller did not settle in {rounds} rounds")

    async def _items(self, kind: Kind) -> list[JSONDict]:
        return list((await self.objects.list(kind, self.namespace))["items"])

    async def _round(self) -> bool:
        changed = False
        for ars in await self._items(AUTOSCALING_RUNNER_SET):
            changed |= await self._scale_set(ars)
        for runner_set in await self._items(EPHEMERAL_RUNNER_SET):
            changed |= await self._runner_set(runner_set)
        for runner in await self._items(EPHEMERAL_RUNNER):
            meta = runner["metadata"]
            if meta.get("deletionTimestamp") and meta.get("finalizers"):
                await self._finalizers(EPHEMERAL_RUNNER, runner, [])
                changed = True
        return changed

    async def _finalizers(self, kind: Kind, obj: JSONDict, finalizers: list[str]) -> None:
        meta = obj["metadata"]
        body = {"metadata": {"finalizers": finalizers or None}}
        await self.objects.patch(kind, meta["namespace"], meta["name"], body)

    async def _delete(self, kind: Kind, obj: JSONDict) -> None:
        try:
            await self.objects.delete(kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
        except NotFound:
            return

    async def _runner_set(self, runner_set: JSONDict) -> bool:
        meta = runner_set["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if not meta.get("deletionTimestamp"):
            if FINALIZER_ERS_LEGACY in finalizers:
                return False
            await self._finalizers(
                EPHEMERAL_RUNNER_SET, runner_set, [*finalizers, FINALIZER_ERS_LEGACY]
            )
            return True
        if FINALIZER_ERS_LEGACY not in finalizers:
            return False
        runners = [
            r
            for r in await self._items(EPHEMERAL_RUNNER)
            if any(o.get("uid") == meta["uid"] for o in r["metadata"].get("ownerReferences") or [])
        ]
        if runners:
            live = [r for r in runners if not r["metadata"].get("deletionTimestamp")]
            for runner in live:
                await self._delete(EPHEMERAL_RUNNER, runner)
            return bool(live)
        rest = [f for f in finalizers if f != FINALIZER_ERS_LEGACY]
        await self._finalizers(EPHEMERAL_RUNNER_SET, runner_set, rest)
        return True

    async def _owned(self, ars: JSONDict) -> list[JSONDict]:
        """Its runner sets, newest first (a tie goes to the one this ARC made last)."""
        name = ars["metadata"]["name"]
        owned = [
            s
            for s in await self._items(EPHEMERAL_RUNNER_SET)
            if any(
                o.get("controller")
                and o.get("kind") == "AutoscalingRunnerSet"
                and o.get("name") == name
                for o in s["metadata"].get("ownerReferences") or []
            )
        ]

        def newest(s: JSONDict) -> tuple[str, int]:
            made = s["metadata"]["name"]
            return s["metadata"]["creationTimestamp"], (
                self.created.index(made) + 1 if made in self.created else 0
            )

        return sorted(owned, key=newest, reverse=True)

    async def _scale_set(self, ars: JSONDict) -> bool:
        meta = ars["metadata"]
        owned = await self._owned(ars)
        if meta.get("deletionTimestamp"):
            if FINALIZER_ARS not in (meta.get("finalizers") or []):
                return False
            for listener in await self._listeners(ars):
                await self._delete(AUTOSCALING_LISTENER, listener)
                return True
            if owned:
                live = [s for s in owned if not s["metadata"].get("deletionTimestamp")]
                for runner_set in live:
                    await self._delete(EPHEMERAL_RUNNER_SET, runner_set)
                return bool(live)
            rest = [f for f in meta.get("finalizers") or [] if f != FINALIZER_ARS]
            await self._finalizers(AUTOSCALING_RUNNER_SET, ars, rest)
            return True
        latest = owned[0] if owned else None
        if (
            latest is None
            or (latest["metadata"].get("annotations") or {}).get(RUNNER_SPEC_HASH) != ARC_DIGEST
        ):
            body = ephemeral_runner_set(ars)
            body["metadata"]["ownerReferences"][0]["uid"] = meta["uid"]
            made = await self.objects.create(EPHEMERAL_RUNNER_SET, self.namespace, body)
            self.created.append(made["metadata"]["name"])
            return True
        old = [s for s in owned[1:] if not s["metadata"].get("deletionTimestamp")]
        for runner_set in old:
            await self._delete(EPHEMERAL_RUNNER_SET, runner_set)
        return bool(old)

    async def _listeners(self, ars: JSONDict) -> list[JSONDict]:
        found = (await self.objects.list(AUTOSCALING_LISTENER, ARC_NAMESPACE))["items"]
        name = ars["metadata"]["name"]
        return [
            listener
            for listener in found
            if (listener.get("spec") or {}).get("autoscalingRunnerSetName") == name
            and not listener["metadata"].get("deletionTimestamp")
        ]
