"""ARC's exact strings: a changed letter breaks objects ARC created, so each is pinned here."""

from __future__ import annotations

import pytest

from shared.api import names

PINNED = [
    (names.API_VERSION, "actions.github.com/v1alpha1"),
    (names.FINALIZER_AUTOSCALING_RUNNER_SET, "autoscalingrunnerset.actions.github.com/finalizer"),
    (names.FINALIZER_AUTOSCALING_LISTENER, "autoscalinglistener.actions.github.com/finalizer"),
    (names.FINALIZER_EPHEMERAL_RUNNER_SET, "ephemeralrunnerset.actions.github.com/finalizer"),
    (names.FINALIZER_EPHEMERAL_RUNNER, "ephemeralrunner.actions.github.com/finalizer"),
    (
        names.FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
        "ephemeralrunner.actions.github.com/runner-registration-finalizer",
    ),
    (names.FINALIZER_CLEANUP_PROTECTION, "actions.github.com/cleanup-protection"),
    (names.FINALIZER_EPHEMERAL_RUNNER_SET_LEGACY, "ephemeralrunner.actions.github.com/finalizer"),
    (names.LABEL_PART_OF, "app.kubernetes.io/part-of"),
    (names.LABEL_COMPONENT, "app.kubernetes.io/component"),
    (names.LABEL_VERSION, "app.kubernetes.io/version"),
    (names.LABEL_SCALE_SET_NAME, "actions.github.com/scale-set-name"),
    (names.LABEL_SCALE_SET_NAMESPACE, "actions.github.com/scale-set-namespace"),
    (names.LABEL_ENTERPRISE, "actions.github.com/enterprise"),
    (names.LABEL_ORGANIZATION, "actions.github.com/organization"),
    (names.LABEL_REPOSITORY, "actions.github.com/repository"),
    (names.LABEL_LISTENER_NAME, "auto-scaling-listener-name"),
    (names.LABEL_LISTENER_NAMESPACE, "auto-scaling-listener-namespace"),
    (names.LABEL_EPHEMERAL_RUNNER, "actions-ephemeral-runner"),
    (names.LABEL_RUNNER_POD, "runner-pod"),
    (names.PART_OF_VALUE, "gha-runner-scale-set"),
    (names.COMPONENT_LISTENER, "runner-scale-set-listener"),
    (names.COMPONENT_RUNNER_SET, "runner-set"),
    (names.COMPONENT_RUNNER, "runner"),
    (names.EPHEMERAL_RUNNER_LABEL_VALUE, "True"),
    (names.ANNOTATION_INTEGRITY_HASH, "actions.github.com/integrity-hash"),
    (names.ANNOTATION_RUNNER_SCALE_SET_ID, "runner-scale-set-id"),
    (names.ANNOTATION_RUNNER_SCALE_SET_NAME, "actions.github.com/runner-scale-set-name"),
    (names.ANNOTATION_RUNNER_GROUP_NAME, "actions.github.com/runner-group-name"),
    (names.ANNOTATION_PATCH_ID, "actions.github.com/patch-id"),
    (names.ANNOTATION_ACTIONABLE_REVISION, "actions.github.com/actionable-revision"),
    (names.ENV_RUNNER_JIT_CONFIG, "ACTIONS_RUNNER_INPUT_JITCONFIG"),
    (names.ENV_RUNNER_CONTAINER_HOOKS, "ACTIONS_RUNNER_CONTAINER_HOOKS"),
    (names.ENV_LISTENER_CONFIG_PATH, "LISTENER_CONFIG_PATH"),
    (names.SECRET_JIT_TOKEN, "jitToken"),
    (names.SECRET_LISTENER_CONFIG, "config.json"),
    (names.LISTENER_CONFIG_PATH, "/etc/gha-listener/config.json"),
    (names.MESSAGE_OUTDATED, "Runner is deprecated"),
    (names.MAX_RUNNERS_UNBOUNDED, 2**31 - 1),
]


@pytest.mark.parametrize(("value", "expected"), PINNED)
def test_arc_string(value: object, expected: object) -> None:
    assert value == expected


def test_cleanup_order_matches_arc() -> None:
    assert [
        a.removeprefix("actions.github.com/cleanup-") for a in names.CLEANUP_ANNOTATIONS_IN_ORDER
    ] == [
        "kubernetes-mode-role-binding-name",
        "kubernetes-mode-role-name",
        "kubernetes-mode-service-account-name",
        "no-permission-service-account-name",
        "github-secret-name",
        "manager-role-binding",
        "manager-role-name",
    ]


def test_cleanup_targets_follow_the_order_and_name_each_kind() -> None:
    from shared.api.kinds import CLEANUP_TARGETS

    assert [a for a, _ in CLEANUP_TARGETS] == list(names.CLEANUP_ANNOTATIONS_IN_ORDER)
    for annotation, kind in CLEANUP_TARGETS:
        noun = {"RoleBinding": "role-binding", "Role": "role", "ServiceAccount": "service-account"}
        assert noun.get(kind.kind, kind.kind.lower()) in annotation, (annotation, kind.kind)
