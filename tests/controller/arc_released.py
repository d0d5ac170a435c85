"""Objects as a released ARC leaves them in a cluster (chart and controller 0.9.3, 0.12.1 and
0.14.2), built by the rules of those tags' own builders as docs/install.md#what-a-released-arc-
leaves records them: the AutoscalingRunnerSet the `gha-runner-scale-set` chart rendered, with the
annotations and finalizer ARC's controller added; the EphemeralRunnerSet ARC's controller made
from it (`generateName: <set>-`, ARC's `runner-spec-hash` digest, the legacy finalizer
`ephemeralrunner.actions.github.com/finalizer`, a controller reference to the set); and ARC's
AutoscalingListener in ARC's namespace under ARC's name, with ARC's listener finalizer.

The three lines build the runner set alike (the set's labels copied, but for the controller's
`--exclude-label-propagation-prefix`es, none by default); what differs and matters to a takeover
is the listener's name: 0.9.3 and 0.12.1 hash the namespace alone, 0.14.2
`namespace@runnerGroup@githubConfigUrl`.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.runners.objects import fnv_hash_string
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
