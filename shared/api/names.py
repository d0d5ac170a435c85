"""ARC's exact strings, shared by the controller, the listener and the sandbox.

Values are ARC's wire strings: a changed letter breaks compatibility with objects ARC created
(tests/shared/api/test_names.py pins the ones such objects carry).
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "actions.github.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "actions.github.com/v1alpha1"

KIND_AUTOSCALING_RUNNER_SET: Final = "AutoscalingRunnerSet"
KIND_AUTOSCALING_LISTENER: Final = "AutoscalingListener"
KIND_EPHEMERAL_RUNNER_SET: Final = "EphemeralRunnerSet"
KIND_EPHEMERAL_RUNNER: Final = "EphemeralRunner"

# The listener config's max_runners when an AutoscalingRunnerSet leaves maxRunners unset.
MAX_RUNNERS_UNBOUNDED: Final = 2_147_483_647
# Not ARC's: the most listener pods one scale set may run (spec.listenerReplicas), one holding
# the message session and the others standing by (docs/autoscaling.md#listener-standby).
MAX_LISTENER_REPLICAS: Final = 3

# Finalizers
FINALIZER_AUTOSCALING_RUNNER_SET: Final = "autoscalingrunnerset.actions.github.com/finalizer"
FINALIZER_AUTOSCALING_LISTENER: Final = "autoscalinglistener.actions.github.com/finalizer"
FINALIZER_EPHEMERAL_RUNNER_SET: Final = "ephemeralrunnerset.actions.github.com/finalizer"
FINALIZER_EPHEMERAL_RUNNER: Final = "ephemeralrunner.actions.github.com/finalizer"
FINALIZER_EPHEMERAL_RUNNER_REGISTRATION: Final = (
    "ephemeralrunner.actions.github.com/runner-registration-finalizer"
)
# On the Helm-created dependents of an AutoscalingRunnerSet (secrets, roles, service accounts).
FINALIZER_CLEANUP_PROTECTION: Final = "actions.github.com/cleanup-protection"
# ARC 0.14.2 put the EphemeralRunner finalizer string on EphemeralRunnerSets; such objects
# still carry it after an upgrade.
FINALIZER_EPHEMERAL_RUNNER_SET_LEGACY: Final = FINALIZER_EPHEMERAL_RUNNER
# Both finalizers an EphemeralRunner carries from its creation on; removed together.
EPHEMERAL_RUNNER_FINALIZERS: Final = (
    FINALIZER_EPHEMERAL_RUNNER,
    FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
)
# Both finalizer strings an EphemeralRunnerSet may carry (the set's own, and the legacy one).
EPHEMERAL_RUNNER_SET_FINALIZERS: Final = (
    FINALIZER_EPHEMERAL_RUNNER_SET,
    FINALIZER_EPHEMERAL_RUNNER_SET_LEGACY,
)

# Labels
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_VERSION: Final = "app.kubernetes.io/version"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_SCALE_SET_NAME: Final = "actions.github.com/scale-set-name"
LABEL_SCALE_SET_NAMESPACE: Final = "actions.github.com/scale-set-namespace"
LABEL_ENTERPRISE: Final = "actions.github.com/enterprise"
LABEL_ORGANIZATION: Final = "actions.github.com/organization"
LABEL_REPOSITORY: Final = "actions.github.com/repository"
LABEL_LISTENER_NAME: Final = "auto-scaling-listener-name"
LABEL_LISTENER_NAMESPACE: Final = "auto-scaling-listener-namespace"
LABEL_EPHEMERAL_RUNNER: Final = "actions-ephemeral-runner"
LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"
LABEL_RUNNER_TEMPLATE_HASH: Final = "runner-template-hash"
LABEL_RUNNER_POD: Final = "runner-pod"

PART_OF_VALUE: Final = "gha-runner-scale-set"
COMPONENT_LISTENER: Final = "runner-scale-set-listener"
COMPONENT_RUNNER_SET: Final = "runner-set"
COMPONENT_RUNNER: Final = "runner"
OS_LINUX: Final = "linux"
EPHEMERAL_RUNNER_LABEL_VALUE: Final = "True"

# Annotations
ANNOTATION_INTEGRITY_HASH: Final = "actions.github.com/integrity-hash"
ANNOTATION_RUNNER_SCALE_SET_ID: Final = "runner-scale-set-id"  # unprefixed, as ARC writes it
ANNOTATION_RUNNER_SCALE_SET_NAME: Final = "actions.github.com/runner-scale-set-name"
ANNOTATION_RUNNER_GROUP_NAME: Final = "actions.github.com/runner-group-name"
ANNOTATION_PATCH_ID: Final = "actions.github.com/patch-id"
# This project's, on an AutoscalingRunnerSet: the EphemeralRunnerSet that holds its runners when
# that set is not named like it (one adopted from a released ARC, which generates the name).
ANNOTATION_RUNNER_SET_NAME: Final = "gha-runner-scaler/runner-set-name"
ANNOTATION_VALUES_HASH: Final = "actions.github.com/values-hash"
# This project's, on an AutoscalingRunnerSet (copied onto its AutoscalingListener): the listener
# group whose one pod serves the set with the other sets of its namespace that name the group
# and share its GitHub config (docs/autoscaling.md#listener-groups).
ANNOTATION_LISTENER_GROUP: Final = "gha-runner-scaler/listener-group"
LABEL_LISTENER_GROUP: Final = "gha-runner-scaler/listener-group"
ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING: Final = "actions.github.com/cleanup-manager-role-binding"
ANNOTATION_CLEANUP_MANAGER_ROLE_NAME: Final = "actions.github.com/cleanup-manager-role-name"
ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-role-name"
)
ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-role-binding-name"
)
ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME: Final = (
    "actions.github.com/cleanup-kubernetes-mode-service-account-name"
)
ANNOTATION_CLEANUP_GITHUB_SECRET_NAME: Final = "actions.github.com/cleanup-github-secret-name"
ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME: Final = (
    "actions.github.com/cleanup-no-permission-service-account-name"
)
# Newer upstream (after ARC's 0.14.2 line; docs/crds.md#newer-upstream-fields).
ANNOTATION_ACTIONABLE_REVISION: Final = "actions.github.com/actionable-revision"
ANNOTATION_AUTOSCALING_RUNNER_SET_GENERATION: Final = (
    "actions.github.com/autoscaling-runner-set-generation"
)
ANNOTATION_LISTENER_CONFIG_RESOURCE_VERSION: Final = (
    "actions.github.com/listener-config-resource-version"
)

# The Helm dependents whose cleanup-protection finalizer the AutoscalingRunnerSet reconciler
# removes on deletion, in ARC's order.
CLEANUP_ANNOTATIONS_IN_ORDER: Final = (
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME,
    ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME,
    ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING,
    ANNOTATION_CLEANUP_MANAGER_ROLE_NAME,
)

# Environment variables
ENV_RUNNER_JIT_CONFIG: Final = "ACTIONS_RUNNER_INPUT_JITCONFIG"
ENV_RUNNER_EXTRA_USER_AGENT: Final = "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT"
ENV_RUNNER_DEPRECATED_EXIT_CODE: Final = "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"
ENV_RUNNER_CONTAINER_HOOKS: Final = "ACTIONS_RUNNER_CONTAINER_HOOKS"
ENV_HTTP_PROXY: Final = "http_proxy"
ENV_HTTPS_PROXY: Final = "https_proxy"
ENV_NO_PROXY: Final = "no_proxy"
ENV_LISTENER_CONFIG_PATH: Final = "LISTENER_CONFIG_PATH"
ENV_LISTENER_ENTRYPOINT: Final = "LISTENER_ENTRYPOINT"
ENV_CONTROLLER_NAMESPACE: Final = "CONTROLLER_MANAGER_POD_NAMESPACE"
ENV_CONTROLLER_IMAGE: Final = "CONTROLLER_MANAGER_CONTAINER_IMAGE"

# A runner exits with this code when its version is deprecated (the EphemeralRunner becomes
# Outdated); ENV_RUNNER_DEPRECATED_EXIT_CODE=1 asks it to.
RUNNER_DEPRECATED_EXIT_CODE: Final = 7

# Secret keys
SECRET_GITHUB_TOKEN: Final = "github_token"
SECRET_GITHUB_APP_ID: Final = "github_app_id"
SECRET_GITHUB_APP_INSTALLATION_ID: Final = "github_app_installation_id"
SECRET_GITHUB_APP_PRIVATE_KEY: Final = "github_app_private_key"
SECRET_PROXY_USERNAME: Final = "username"
SECRET_PROXY_PASSWORD: Final = "password"
SECRET_JIT_TOKEN: Final = "jitToken"
SECRET_RUNNER_NAME: Final = "runnerName"
SECRET_RUNNER_ID: Final = "runnerId"
SECRET_SCALE_SET_ID: Final = "scaleSetId"
SECRET_LISTENER_CONFIG: Final = "config.json"

# Status reasons and messages
REASON_INVALID_POD: Final = "InvalidPod"
MESSAGE_INVALID_POD_PREFIX: Final = "Failed to create the pod: "
REASON_OUTDATED: Final = "Outdated"
MESSAGE_OUTDATED: Final = "Runner is deprecated"

# Names inside pods
RUNNER_CONTAINER: Final = "runner"
LISTENER_CONTAINER: Final = "listener"
LISTENER_CONFIG_VOLUME: Final = "listener-config"
LISTENER_CONFIG_MOUNT_PATH: Final = "/etc/gha-listener"
LISTENER_CONFIG_PATH: Final = f"{LISTENER_CONFIG_MOUNT_PATH}/config.json"
METRICS_PORT_NAME: Final = "metrics"

FIELD_INDEX_CONTROLLER: Final = ".metadata.controller"

# Controller metrics (labels: name, namespace, repository, organization, enterprise)
METRIC_CONTROLLER_PENDING_RUNNERS: Final = "gha_controller_pending_ephemeral_runners"
METRIC_CONTROLLER_RUNNING_RUNNERS: Final = "gha_controller_running_ephemeral_runners"
METRIC_CONTROLLER_FAILED_RUNNERS: Final = "gha_controller_failed_ephemeral_runners"
METRIC_CONTROLLER_RUNNING_LISTENERS: Final = "gha_controller_running_listeners"
