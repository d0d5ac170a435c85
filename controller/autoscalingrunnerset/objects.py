"""What the AutoscalingRunnerSet reconciler builds: its EphemeralRunnerSet and its
AutoscalingListener, shaped as ARC builds them (docs/autoscaling.md#objects).

Every function here is pure: an AutoscalingRunnerSet (and the scale set id it registered) in, a
dict out. Drift is judged on what these functions compute, never on a whole stored object, so a
key someone else added (a label, an annotation) never makes a pass write again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from controller.runners.objects import (
    ANNOTATION_RUNNER_SPEC_HASH,
    filter_and_merge_labels,
    fnv_hash_string,
    json_digest,
    resource_meta,
)
from shared.actions.config import parse_config_url
from shared.actions.errors import InvalidConfigURL
from shared.api.names import (
    ANNOTATION_LISTENER_GROUP,
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_RUNNER_SCALE_SET_NAME,
    API_VERSION,
    COMPONENT_LISTENER,
    COMPONENT_RUNNER_SET,
    KIND_AUTOSCALING_LISTENER,
    KIND_EPHEMERAL_RUNNER_SET,
    LABEL_COMPONENT,
    LABEL_ENTERPRISE,
    LABEL_ORGANIZATION,
    LABEL_PART_OF,
    LABEL_REPOSITORY,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LABEL_VERSION,
    MAX_RUNNERS_UNBOUNDED,
    PART_OF_VALUE,
)
from shared.kube.views import metadata_of
from shared.policy import ScalingPolicy
from shared.typedefs import JSONDict, RawOwnerReference

ANNOTATION_LISTENER = "gha-runner-scaler/listener"
"""On an AutoscalingRunnerSet: `docker-run` when its listener runs outside the cluster; then no
AutoscalingListener is made for it."""
LISTENER_DOCKER_RUN = "docker-run"
LISTENER_REPLICAS = "listenerReplicas"

LABEL_VALUE_MAX = 63


def trim_label_value(value: str) -> str:
    """ARC's rule: longer than a label value may be, keep 58 characters and add `-trim`."""
    if len(value) > LABEL_VALUE_MAX:
        return value[:58] + "-trim"
    return value.strip("-_.")


def github_url_labels(config_url: str) -> dict[str, str]:
    """`actions.github.com/enterprise`, `/organization`, `/repository` for the parts the
    GitHub URL names; none for a URL that does not parse."""
    try:
        config = parse_config_url(config_url, env={})
    except InvalidConfigURL:
        return {}
    parts = {
        LABEL_ENTERPRISE: config.enterprise,
        LABEL_ORGANIZATION: config.organization,
        LABEL_REPOSITORY: config.repository,
    }
    return {key: trim_label_value(value) for key, value in parts.items() if value}


def owner_reference(ars: JSONDict) -> RawOwnerReference:
    meta = metadata_of(ars)
    return {
        "apiVersion": API_VERSION,
        "kind": "AutoscalingRunnerSet",
        "name": meta["name"],
        "uid": str(meta.get("uid", "")),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _present(values: Mapping[str, object]) -> JSONDict:
    return {key: value for key, value in values.items() if value is not None}


def runner_spec(ars: JSONDict, *, scale_set_id: int) -> JSONDict:
    """The `ephemeralRunnerSpec` of the set: credentials, network, the runner pod template."""
    spec = ars.get("spec") or {}
    template = spec.get("template") or {}
    return _present(
        {
            "runnerScaleSetId": scale_set_id,
            "githubConfigUrl": spec.get("githubConfigUrl"),
            "githubConfigSecret": spec.get("githubConfigSecret"),
            "proxy": spec.get("proxy"),
            "githubServerTLS": spec.get("githubServerTLS"),
            "vaultConfig": spec.get("vaultConfig"),
            "ephemeralRunnerConfigSecretMetadata": spec.get("ephemeralRunnerConfigSecretMetadata"),
            "metadata": template.get("metadata"),
            "spec": template.get("spec") or {"containers": []},
        }
    )


def runner_set_labels(ars: JSONDict, *, excluded_prefixes: Sequence[str]) -> dict[str, str]:
    """The labels this reconciler owns on the set (the user's ERS metadata underneath)."""
    meta = metadata_of(ars)
    computed = {
        LABEL_PART_OF: PART_OF_VALUE,
        LABEL_COMPONENT: COMPONENT_RUNNER_SET,
        LABEL_SCALE_SET_NAME: meta["name"],
        LABEL_SCALE_SET_NAMESPACE: meta["namespace"],
        **github_url_labels(str((ars.get("spec") or {}).get("githubConfigUrl", ""))),
    }
    # ARC writes the label always, `""` when the set has none.
    computed[LABEL_VERSION] = str((meta.get("labels") or {}).get(LABEL_VERSION) or "")
    user_labels, _ = resource_meta(ars.get("spec") or {}, "ephemeralRunnerSetMetadata")
    return filter_and_merge_labels(
        {**user_labels, **(meta.get("labels") or {})},
        computed,
        excluded_prefixes=excluded_prefixes,
    )


def runner_set_annotations(ars: JSONDict) -> dict[str, str]:
    annotations = metadata_of(ars).get("annotations") or {}
    _, user = resource_meta(ars.get("spec") or {}, "ephemeralRunnerSetMetadata")
    for key in (ANNOTATION_RUNNER_GROUP_NAME, ANNOTATION_RUNNER_SCALE_SET_NAME):
        if key in annotations:
            user[key] = annotations[key]
    return user


def new_runner_set(
    ars: JSONDict, *, scale_set_id: int, excluded_prefixes: Sequence[str]
) -> JSONDict:
    """The set, created at 0 replicas and patch id 0: the listener decides how many."""
    meta = metadata_of(ars)
    spec = runner_spec(ars, scale_set_id=scale_set_id)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_EPHEMERAL_RUNNER_SET,
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": runner_set_labels(ars, excluded_prefixes=excluded_prefixes),
            "annotations": {
                **runner_set_annotations(ars),
                ANNOTATION_RUNNER_SPEC_HASH: json_digest(spec),
            },
            "ownerReferences": [owner_reference(ars)],
        },
        "spec": _present(
            {
                "replicas": 0,
                "patchID": 0,
                "ephemeralRunnerSpec": spec,
                "ephemeralRunnerMetadata": (ars.get("spec") or {}).get("ephemeralRunnerMetadata"),
            }
        ),
    }


def listener_name(ars: JSONDict) -> str:
    """ARC's name: `<set>-<8 letters of the hash of namespace@group@url>-listener`."""
    meta = metadata_of(ars)
    spec = ars.get("spec") or {}
    key = f"{meta['namespace']}@{spec.get('runnerGroup') or ''}@{spec.get('githubConfigUrl', '')}"
    return f"{meta['name']}-{fnv_hash_string(key)[:8]}-listener"


def listener_spec(
    ars: JSONDict,
    *,
    scale_set_id: int,
    runner_set: str,
    image: str,
    image_pull_secrets: Sequence[str],
) -> JSONDict:
    meta = metadata_of(ars)
    spec = ars.get("spec") or {}
    max_runners = spec.get("maxRunners")
    return _present(
        {
            "githubConfigUrl": spec.get("githubConfigUrl"),
            "githubConfigSecret": spec.get("githubConfigSecret"),
            "runnerScaleSetId": scale_set_id,
            "autoscalingRunnerSetNamespace": meta["namespace"],
            "autoscalingRunnerSetName": meta["name"],
            "ephemeralRunnerSetName": runner_set,
            "minRunners": spec.get("minRunners") or 0,
            "maxRunners": MAX_RUNNERS_UNBOUNDED if max_runners is None else max_runners,
            "image": image,
            # The same list when building and when comparing (ARC compares against none and
            # re-creates its listeners for ever when pull secrets are set).
            "imagePullSecrets": [{"name": name} for name in image_pull_secrets] or None,
            "proxy": spec.get("proxy"),
            "githubServerTLS": spec.get("githubServerTLS"),
            "vaultConfig": spec.get("vaultConfig"),
            "metrics": spec.get("listenerMetrics"),
            "template": spec.get("listenerTemplate"),
            "serviceAccountMetadata": spec.get("listenerServiceAccountMetadata"),
            "roleMetadata": spec.get("listenerRoleMetadata"),
            "roleBindingMetadata": spec.get("listenerRoleBindingMetadata"),
            "configSecretMetadata": spec.get("listenerConfigSecretMetadata"),
            "scalingPolicy": spec.get("scalingPolicy"),
            LISTENER_REPLICAS: spec.get(LISTENER_REPLICAS),
        }
    )


def listener_labels(ars: JSONDict, *, excluded_prefixes: Sequence[str]) -> dict[str, str]:
    meta = metadata_of(ars)
    computed = {
        LABEL_SCALE_SET_NAMESPACE: meta["namespace"],
        LABEL_SCALE_SET_NAME: meta["name"],
        LABEL_PART_OF: PART_OF_VALUE,
        LABEL_COMPONENT: COMPONENT_LISTENER,
        **github_url_labels(str((ars.get("spec") or {}).get("githubConfigUrl", ""))),
    }
    # ARC writes the label always, `""` when the set has none.
    computed[LABEL_VERSION] = str((meta.get("labels") or {}).get(LABEL_VERSION) or "")
    user_labels, _ = resource_meta(ars.get("spec") or {}, "autoscalingListener")
    return filter_and_merge_labels(
        {**user_labels, **(meta.get("labels") or {})},
        computed,
        excluded_prefixes=excluded_prefixes,
    )


def new_listener(
    ars: JSONDict,
    *,
    namespace: str,
    scale_set_id: int,
    runner_set: str,
    image: str,
    image_pull_secrets: Sequence[str],
    excluded_prefixes: Sequence[str],
) -> JSONDict:
    """The AutoscalingListener, in the controller's namespace: no owner reference can cross
    namespaces, so the reconciler deletes it itself. It drives `runner_set`, the set that holds
    the scale set's runners (ARC's generated name on a set adopted from ARC)."""
    _, annotations = resource_meta(ars.get("spec") or {}, "autoscalingListener")
    group = (metadata_of(ars).get("annotations") or {}).get(ANNOTATION_LISTENER_GROUP)
    if group is not None:
        # The listener group serving the set (docs/autoscaling.md#listener-groups): joining or
        # leaving one re-creates the listener, as any change of what it runs with does.
        annotations = {**annotations, ANNOTATION_LISTENER_GROUP: str(group)}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_AUTOSCALING_LISTENER,
        "metadata": {
            "name": listener_name(ars),
            "namespace": namespace,
            "labels": listener_labels(ars, excluded_prefixes=excluded_prefixes),
            "annotations": annotations,
        },
        "spec": listener_spec(
            ars,
            scale_set_id=scale_set_id,
            runner_set=runner_set,
            image=image,
            image_pull_secrets=image_pull_secrets,
        ),
    }


def only_listener_replicas_differ(have: JSONDict, want: JSONDict) -> bool:
    """Two listener specs that differ in `listenerReplicas` alone. The listener is then updated
    in place rather than made again: its ServiceAccount, Role and Secrets stay, and its pods are
    made again only when their config changes (standby turned on or off), so going from 2 to 3
    replicas leaves the one holding the session alone."""

    def rest(spec: JSONDict) -> JSONDict:
        return {key: value for key, value in spec.items() if key != LISTENER_REPLICAS}

    return have != want and rest(have) == rest(want)


def drifted(have: Mapping[str, object] | None, want: Mapping[str, object]) -> dict[str, object]:
    """The keys of `want` whose value `have` lacks or differs on."""
    have = have or {}
    return {key: value for key, value in want.items() if have.get(key) != value}


def scaling_policy_problem(ars: JSONDict) -> str | None:
    """What is wrong with the set's `spec.scalingPolicy`, in one line naming each field path,
    or None. The CRD schema checks its shape; a cron expression, a time zone and a count above
    maxRunners are checked here, before the listener would refuse its config."""
    spec = ars.get("spec") or {}
    raw = spec.get("scalingPolicy")
    if raw is None:
        return None
    try:
        policy = ScalingPolicy.model_validate(raw)
    except ValidationError as exc:
        return "; ".join(
            f"spec.scalingPolicy{_path(error['loc'])}: "
            + str(error["msg"]).removeprefix("Value error, ")
            for error in exc.errors(include_input=False, include_url=False)
        )
    max_runners = spec.get("maxRunners")
    problems = policy.bound_problems(
        min_runners=int(spec.get("minRunners") or 0),
        max_runners=MAX_RUNNERS_UNBOUNDED if max_runners is None else int(max_runners),
    )
    return "; ".join(f"spec.scalingPolicy.{problem}" for problem in problems) or None


def _path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
