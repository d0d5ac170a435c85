"""The listener pod the controller builds (docs/autoscaling.md#the-listener-pod): what a
tenant's `listenerTemplate` may set (docs/security.md#listener-pod), the identity it runs as,
its port, probes and resources, and the settings that change them."""

from __future__ import annotations

import re

import pytest

from controller.autoscalinglistener.objects import listener_pod, template_refusals
from controller.settings import (
    LISTENER_RESOURCES,
    ConfigError,
    ControllerSettings,
    InClusterSettings,
    RunnerSettings,
    in_cluster_settings_from_environment,
)
from sandbox.kube.testing import PROJECT_ROOT
from shared.typedefs import JSONDict


def listener(template: JSONDict | None = None) -> JSONDict:
    return {
        "metadata": {"name": "arc-listener", "namespace": "system", "uid": "u"},
        "spec": {"image": "gha-runner-scaler:test", "template": template},
    }


def build(template: JSONDict | None = None, **settings: object) -> JSONDict:
    return listener_pod(
        listener(template),
        config_digest="d",
        metrics_addr=InClusterSettings().listener(RunnerSettings()).metrics_addr,
        **settings,  # type: ignore[arg-type]
    )


def test_the_listener_runs_as_the_images_user_and_group() -> None:
    """Before: `runAsNonRoot` only, and a real kubelet ran the process with group 0."""
    image_user = re.search(r"^USER (\d+):(\d+)$", (PROJECT_ROOT / "Dockerfile").read_text(), re.M)
    assert image_user is not None
    context = build()["spec"]["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (
        int(image_user.group(1)),
        int(image_user.group(2)),
    )
    assert context["runAsNonRoot"] is True


def test_the_listener_port_is_not_the_controllers() -> None:
    """Before: both 8080 by default, and with host networking the scheduler left the listener
    Pending ("didn't have free ports")."""
    [container] = build()["spec"]["containers"]
    [port] = container["ports"]
    controller = ControllerSettings.model_fields
    assert port == {"name": "metrics", "containerPort": 8090, "protocol": "TCP"}
    assert port["containerPort"] not in {
        controller["metrics_port"].default,
        controller["health_port"].default,
    }


def test_liveness_and_readiness_wait_for_the_process_to_listen() -> None:
    """Before: the readiness probe was sent at once, to a port nobody listened on yet, and the
    kubelet reported an `Unhealthy` Warning Event."""
    [container] = build()["spec"]["containers"]
    startup = container["startupProbe"]
    assert startup["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert startup["initialDelaySeconds"] >= 10
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60
    assert "initialDelaySeconds" not in container["readinessProbe"]


def test_default_resources_replaced_by_the_setting_or_the_template() -> None:
    [default] = build()["spec"]["containers"]
    assert default["resources"] == LISTENER_RESOURCES
    assert LISTENER_RESOURCES["limits"]["memory"] == "256Mi"
    tuned = {"requests": {"memory": "128Mi"}}
    [setting] = build(resources=tuned)["spec"]["containers"]
    assert setting["resources"] == tuned
    [unset] = build(resources={})["spec"]["containers"]
    assert "resources" not in unset
    template = {"spec": {"containers": [{"name": "listener", "resources": tuned}]}}
    [templated] = build(template)["spec"]["containers"]
    assert templated["resources"] == tuned


@pytest.mark.parametrize(
    "template",
    [
        pytest.param(None, id="none"),
        pytest.param({"metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}}}, id="meta"),
        pytest.param(
            {
                "spec": {
                    "nodeSelector": {"pool": "x"},
                    "affinity": {"nodeAffinity": {}},
                    "tolerations": [{"operator": "Exists"}],
                    "topologySpreadConstraints": [{"maxSkew": 1}],
                    "priorityClassName": "high",
                    "containers": [
                        {
                            "name": "listener",
                            "resources": {"limits": {"memory": "1Gi"}},
                            "env": [
                                {"name": "TZ", "value": "UTC"},
                                {"name": "LISTENER_LOG_LEVEL", "value": "debug"},
                                {"name": "LISTENER_LOG_FORMAT", "value": "json"},
                                {"name": "LISTENER_LIBRARY_LOG_LEVEL", "value": "info"},
                                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                                {
                                    "name": "MEM",
                                    "valueFrom": {"resourceFieldRef": {"resource": "x"}},
                                },
                            ],
                        }
                    ],
                }
            },
            id="scheduling-resources-env",
        ),
        pytest.param({"spec": {"hostNetwork": None}}, id="null-is-unset"),
    ],
)
def test_what_a_template_may_set(template: JSONDict | None) -> None:
    assert template_refusals(template) == []


@pytest.mark.parametrize(
    ("template", "refused"),
    [
        pytest.param({"spec": {"hostPID": True}}, ["spec.hostPID"], id="host-pid"),
        pytest.param({"spec": {"hostNetwork": False}}, ["spec.hostNetwork"], id="set-at-all"),
        pytest.param(
            {"spec": {"volumes": [{"name": "v", "secret": {"secretName": "b-listener-config"}}]}},
            ["spec.volumes"],
            id="another-sets-secret",
        ),
        pytest.param({"spec": {"securityContext": {}}}, ["spec.securityContext"], id="pod-context"),
        pytest.param(
            {"spec": {"serviceAccountName": "gha-controller"}},
            ["spec.serviceAccountName"],
            id="service-account",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "listener", "image": "x", "command": ["sh"]}]}},
            ["spec.containers[0].image", "spec.containers[0].command"],
            id="image-command",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "listener", "envFrom": [{"secretRef": {}}]}]}},
            ["spec.containers[0].envFrom"],
            id="env-from",
        ),
        pytest.param(
            {
                "spec": {
                    "containers": [
                        {
                            "name": "listener",
                            "env": [
                                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}},
                                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "c"}}},
                                {"name": "LD_PRELOAD", "value": "/x.so"},
                                {"name": "PYTHONPATH", "value": "/x"},
                                {"name": "LISTENER_CONFIG_PATH", "value": "/x"},
                                # Each overrides the config the controller wrote: where the
                                # set's credentials go, and whether over plain http.
                                {"name": "LISTENER_CONFIGURE_URL", "value": "http://x"},
                                {"name": "LISTENER_ALLOW_INSECURE_GITHUB", "value": "true"},
                                {"name": "LISTENER_GITHUB_TOKEN_FILE", "value": "/x"},
                            ],
                        }
                    ]
                }
            },
            [
                "spec.containers[0].env[0].valueFrom.secretKeyRef",
                "spec.containers[0].env[1].valueFrom.configMapKeyRef",
                "spec.containers[0].env[2].name",
                "spec.containers[0].env[3].name",
                "spec.containers[0].env[4].name",
                "spec.containers[0].env[5].name",
                "spec.containers[0].env[6].name",
                "spec.containers[0].env[7].name",
            ],
            id="env-sources-and-names",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "listener"}, {"name": "sidecar"}]}},
            ["spec.containers[1]"],
            id="sidecar",
        ),
        pytest.param(
            {"spec": {"initContainers": [{"name": "i"}]}}, ["spec.initContainers"], id="init"
        ),
        pytest.param({"metadata": {"name": "x"}}, ["metadata.name"], id="metadata-name"),
    ],
)
def test_what_a_template_may_not_set(template: JSONDict, refused: list[str]) -> None:
    assert template_refusals(template) == refused


def test_the_operators_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert InClusterSettings().listener(RunnerSettings()).trust_templates is False
    monkeypatch.setenv("GHA_CONTROLLER_TRUST_LISTENER_TEMPLATES", "true")
    monkeypatch.setenv("GHA_CONTROLLER_LISTENER_RESOURCES", '{"requests": {"cpu": "25m"}}')
    settings = in_cluster_settings_from_environment().listener(RunnerSettings())
    assert settings.trust_templates is True
    assert settings.resources == {"requests": {"cpu": "25m"}}


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('{"requests": {"cpu": "lots"}}', "requests.cpu 'lots' is not a Kubernetes quantity"),
        ('{"minimums": {}}', "'minimums' is not requests or limits"),
        ("[1]", "GHA_CONTROLLER_LISTENER_RESOURCES"),
    ],
)
def test_unusable_resources_stop_the_controller_saying_what_to_fix(
    monkeypatch: pytest.MonkeyPatch, value: str, said: str
) -> None:
    monkeypatch.setenv("GHA_CONTROLLER_LISTENER_RESOURCES", value)
    with pytest.raises(ConfigError, match=re.escape(said)):
        in_cluster_settings_from_environment()
