"""What the AutoscalingListener reconciler builds for one listener: its ServiceAccount, the Role
and RoleBinding in the runner namespace, the config and proxy Secrets, the pods
(docs/autoscaling.md#the-listener-pod) and, with standby replicas, their Lease.

Pure functions: a listener (and what was read for it) in, objects out. Each object carries
`actions.github.com/integrity-hash`, a digest of what was computed for it; the pod's digest
covers its spec and the config Secret's data, so a credential or CA rotation restarts it.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

from controller.runners.listeners import (
    ARC_ENTRYPOINT,
    listener_image,
    runs_arc_listener,
)
from controller.runners.objects import json_digest, resource_meta
from controller.settings import LISTENER_COMMAND, LISTENER_RESOURCES, StandbyTimings
from shared.api.names import (
    ANNOTATION_INTEGRITY_HASH,
    API_VERSION,
    ENV_HTTP_PROXY,
    ENV_HTTPS_PROXY,
    ENV_LISTENER_CONFIG_PATH,
    ENV_NO_PROXY,
    KIND_AUTOSCALING_LISTENER,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_OS,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LISTENER_CONFIG_MOUNT_PATH,
    LISTENER_CONFIG_PATH,
    LISTENER_CONFIG_VOLUME,
    LISTENER_CONTAINER,
    METRICS_PORT_NAME,
    OS_LINUX,
    SECRET_LISTENER_CONFIG,
)
from shared.kube.objects import LEASE
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict, RawOwnerReference

GRACE_PERIOD_SECONDS = 60
RBAC_GROUP = "rbac.authorization.k8s.io"
RUN_AS = 10001
"""The listener's uid and primary group: the image's `USER 10001:10001`, set on the pod so a
kubelet never runs it with group 0 (a pod with `runAsNonRoot` but no group gets gid 0)."""
STARTUP_DELAY_SECONDS = 10
"""When the kubelet first asks whether the listener listens: `gha-listener` took 4.9-6.4 s from
exec to listening on a 2-core machine at load average 14-16 (docs/autoscaling.md#the-listener-pod),
so a probe sent earlier is refused and reported as an `Unhealthy` Warning Event."""


def owner_reference(listener: JSONDict) -> RawOwnerReference:
    meta = metadata_of(listener)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_AUTOSCALING_LISTENER,
        "name": meta["name"],
        "uid": str(meta.get("uid", "")),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _scale_set_labels(listener: JSONDict) -> dict[str, str]:
    spec = listener.get("spec") or {}
    return {
        LABEL_SCALE_SET_NAMESPACE: str(spec.get("autoscalingRunnerSetNamespace", "")),
        LABEL_SCALE_SET_NAME: str(spec.get("autoscalingRunnerSetName", "")),
    }


def _metadata(
    listener: JSONDict,
    *,
    namespace: str,
    name: str,
    user_meta: str,
    labels: Mapping[str, str],
    digest: str,
    owned: bool,
) -> JSONDict:
    user_labels, user_annotations = resource_meta(listener.get("spec") or {}, user_meta)
    meta: JSONDict = {
        "name": name,
        "namespace": namespace,
        "labels": {**user_labels, **labels},
        "annotations": {**user_annotations, ANNOTATION_INTEGRITY_HASH: digest},
    }
    if owned:
        meta["ownerReferences"] = [owner_reference(listener)]
    return meta


def service_account(listener: JSONDict) -> JSONDict:
    meta = metadata_of(listener)
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(
            listener,
            namespace=meta["namespace"],
            name=meta["name"],
            user_meta="serviceAccountMetadata",
            labels={**(meta.get("labels") or {}), **_scale_set_labels(listener)},
            digest=json_digest({}),
            owned=True,
        ),
    }


def listener_replicas(listener: JSONDict) -> int:
    """How many listener pods run (`spec.listenerReplicas`; unset means ARC's one)."""
    return int((listener.get("spec") or {}).get("listenerReplicas") or 1)


def lease_name(listener: JSONDict) -> str:
    """The standby Lease is named as the listener."""
    return metadata_of(listener)["name"]


def standby_lease_name(listener: JSONDict) -> str:
    """The Lease its pods take turns on; "" with one pod (ARC's: no Lease)."""
    return lease_name(listener) if listener_replicas(listener) > 1 else ""


def pod_name(listener: JSONDict, replica: int) -> str:
    """Replica 0 keeps ARC's name, the listener's; replica i is `<listener>-<i>`."""
    name = metadata_of(listener)["name"]
    return name if replica == 0 else f"{name}-{replica}"


def role_rules(*runner_set_names: str, leases: Sequence[str] = ()) -> list[JSONDict]:
    """The listener's least privilege (docs/autoscaling.md#the-listeners-role): read runners (it
    reads a runner before promoting it, which ARC's Role cannot) and patch their status only,
    patch its runner sets, one rule naming each (a listener group's pod serves several:
    docs/autoscaling.md#listener-groups; manifests/admission/ confines that patch to `replicas`
    and `patchID`); with standby replicas, read and renew their Lease, one rule naming each (a
    group's pods take one Lease per member), never create it: the controller does. The
    admission policy on the controller's Roles accepts exactly these shapes
    (docs/security.md#identities)."""
    rules: list[JSONDict] = [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunnersets"],
            "resourceNames": [name],
            "verbs": ["patch"],
        }
        for name in runner_set_names
    ]
    rules += [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunners"],
            "verbs": ["get"],
        },
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunners/status"],
            "verbs": ["patch"],
        },
    ]
    rules += [
        {
            "apiGroups": [LEASE.group],
            "resources": [LEASE.plural],
            "resourceNames": [lease],
            "verbs": ["get", "update"],
        }
        for lease in leases
    ]
    return rules


def granted_leases(role: JSONDict | None) -> list[str]:
    """The Leases a Role (as stored) lets standby listeners renew."""
    return [
        str(name)
        for rule in (role or {}).get("rules") or []
        if LEASE.group in (rule.get("apiGroups") or [])
        for name in rule.get("resourceNames") or []
    ]


def _rbac_labels(listener: JSONDict) -> dict[str, str]:
    meta = metadata_of(listener)
    return {
        **(meta.get("labels") or {}),
        **_scale_set_labels(listener),
        LABEL_LISTENER_NAMESPACE: meta["namespace"],
        LABEL_LISTENER_NAME: meta["name"],
    }


def role(listener: JSONDict) -> JSONDict:
    spec = listener.get("spec") or {}
    standby = standby_lease_name(listener)
    rules = role_rules(
        str(spec.get("ephemeralRunnerSetName", "")), leases=(standby,) if standby else ()
    )
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "Role",
        "metadata": _metadata(
            listener,
            namespace=str(spec.get("autoscalingRunnerSetNamespace", "")),
            name=metadata_of(listener)["name"],
            user_meta="roleMetadata",
            labels=_rbac_labels(listener),
            digest=json_digest(rules),
            owned=False,
        ),
        "rules": rules,
    }


def role_binding(listener: JSONDict) -> JSONDict:
    meta = metadata_of(listener)
    spec = listener.get("spec") or {}
    binding = {
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": meta["name"]},
        "subjects": [
            {"kind": "ServiceAccount", "namespace": meta["namespace"], "name": meta["name"]}
        ],
    }
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(
            listener,
            namespace=str(spec.get("autoscalingRunnerSetNamespace", "")),
            name=meta["name"],
            user_meta="roleBindingMetadata",
            labels=_rbac_labels(listener),
            digest=json_digest(binding),
            owned=False,
        ),
        **binding,
    }


def lease(listener: JSONDict) -> JSONDict:
    """The standby Lease, in the runner namespace with the listener's labels. Made empty: its
    holder, renewals and annotations belong to the listener pods, so it is never patched."""
    spec = listener.get("spec") or {}
    return {
        "apiVersion": LEASE.api_version,
        "kind": LEASE.kind,
        "metadata": {
            "name": lease_name(listener),
            "namespace": str(spec.get("autoscalingRunnerSetNamespace", "")),
            "labels": _rbac_labels(listener),
        },
        "spec": {},
    }


def listener_config(
    listener: JSONDict,
    *,
    credentials: Mapping[str, str],
    root_ca: str,
    log_level: str,
    log_format: str,
    metrics_addr: str,
    metrics_endpoint: str,
    standby: StandbyTimings,
    allow_insecure_github: bool = False,
    metrics_auth: bool = False,
) -> JSONDict:
    """The listener's config, with ARC's keys in ARC's order (docs/listener.md#configuration),
    then `scaling_policy` when the listener has one, the standby keys when it has more than
    one pod, `allow_insecure_github` when the controller allows plain http GitHub URLs, and
    `metrics_auth` when the controller serves its metrics to authorized scrapers only.
    `credentials` holds the GitHub Secret's keys (a PAT or an App)."""
    spec = listener.get("spec") or {}
    installation = credentials.get("github_app_installation_id", "")
    config: JSONDict = {
        "configure_url": spec.get("githubConfigUrl", ""),
        "vault_type": "",
        "vault_lookup_key": "",
        "github_app_id": credentials.get("github_app_id", ""),
        "github_app_installation_id": int(installation) if installation.isdigit() else 0,
        "github_app_private_key": credentials.get("github_app_private_key", ""),
        "github_token": credentials.get("github_token", ""),
        "ephemeral_runner_set_namespace": spec.get("autoscalingRunnerSetNamespace", ""),
        "ephemeral_runner_set_name": spec.get("ephemeralRunnerSetName", ""),
        "max_runners": spec.get("maxRunners", 0),
        "min_runners": spec.get("minRunners", 0),
        "runner_scale_set_id": spec.get("runnerScaleSetId", 0),
        "runner_scale_set_name": spec.get("autoscalingRunnerSetName", ""),
        "server_root_ca": root_ca,
        "log_level": log_level,
        "log_format": log_format,
        "metrics_addr": metrics_addr,
        "metrics_endpoint": metrics_endpoint,
        "metrics": go_metrics(spec.get("metrics")),
    }
    # Not an ARC key: written only when the set has a policy (docs/policies.md), so the config
    # of a set without one is ARC's.
    if spec.get("scalingPolicy") is not None:
        config["scaling_policy"] = spec["scalingPolicy"]
    # Not ARC keys either, and only with standby replicas (docs/autoscaling.md#listener-standby).
    if lease_name := standby_lease_name(listener):
        config["standby_lease_name"] = lease_name
        config["standby_lease_duration_seconds"] = standby.lease_duration_seconds
        config["standby_renew_deadline_seconds"] = standby.renew_deadline_seconds
        config["standby_retry_period_seconds"] = standby.retry_period_seconds
    # Not an ARC key: the controller's opt-in (docs/security.md#transport) reaches its listeners.
    if allow_insecure_github:
        config["allow_insecure_github"] = True
    # Nor this: the controller's `--metrics-auth` (docs/security.md#metrics) holds for its
    # listeners' metrics, which carry the same repository and workflow names.
    if metrics_auth:
        config["metrics_auth"] = True
    return config


_GO_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _go_float(value: float) -> str:
    """A float64 as Go's encoding/json writes it: the shortest digits, in plain notation from
    1e-6 to 1e21 and else as 1e+21 or 1e-7 (Python writes `1.0`, `1e+16` and `1e-07`)."""
    if value.is_integer() and abs(value) < 1e21:
        return ("-" if math.copysign(1.0, value) < 0 else "") + str(abs(int(value)))
    if 1e-6 <= abs(value) < 1e21:
        return format(Decimal(repr(value)), "f")
    mantissa, _, exponent = repr(value).partition("e")
    return f"{mantissa}e{exponent[0]}{exponent[1:].lstrip('0')}"


def go_json(value: object) -> str:
    """`value` as Go's `json.Encoder.Encode` writes it (docs/listener.md#configuration): compact,
    keys in the order given (a struct's field order; a Go map's are sorted by the caller), UTF-8
    unescaped but `<`, `>`, `&`, U+2028 and U+2029 escaped, a newline at the end."""

    def encode(item: object) -> str:
        if isinstance(item, float):
            return _go_float(item)
        if isinstance(item, dict):
            return "{" + ",".join(f"{encode(str(k))}:{encode(v)}" for k, v in item.items()) + "}"
        if isinstance(item, list):
            return "[" + ",".join(encode(v) for v in item) + "]"
        text = json.dumps(item, ensure_ascii=False)
        return re.sub("[<>&\u2028\u2029]", lambda m: _GO_ESCAPES[m.group()], text)

    return encode(value) + "\n"


def go_metrics(metrics: JSONDict | None) -> JSONDict | None:
    """`spec.metrics` as ARC's MetricsConfig struct marshals: counters, gauges, histograms in
    that order, each left out when empty, their metrics sorted by name (a Go map), `labels`
    always written (null when unset), `buckets` only when set."""
    if metrics is None:
        return None
    out: JSONDict = {}
    for kind in ("counters", "gauges", "histograms"):
        entries = metrics.get(kind) or {}
        if not entries:
            continue
        out[kind] = {}
        for name in sorted(entries):
            entry = entries[name]
            if entry is None:
                out[kind][name] = None
                continue
            struct: JSONDict = {"labels": entry.get("labels")}
            if kind == "histograms" and entry.get("buckets"):
                struct["buckets"] = [float(b) for b in entry["buckets"]]
            out[kind][name] = struct
    return out


def config_secret(listener: JSONDict, config: JSONDict) -> JSONDict:
    meta = metadata_of(listener)
    data = {SECRET_LISTENER_CONFIG: go_json(config)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(
            listener,
            namespace=meta["namespace"],
            name=f"{meta['name']}-config",
            user_meta="configSecretMetadata",
            labels={},
            digest=json_digest(data),
            owned=True,
        ),
        "data": encoded(data),
    }


def proxy_secret(listener: JSONDict, data: Mapping[str, str]) -> JSONDict:
    meta = metadata_of(listener)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{meta['name']}-proxy",
            "namespace": meta["namespace"],
            "labels": _scale_set_labels(listener),
            "annotations": {ANNOTATION_INTEGRITY_HASH: json_digest(dict(data))},
            "ownerReferences": [owner_reference(listener)],
        },
        "data": encoded(data),
    }


def encoded(data: Mapping[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}


def _metrics_port(metrics_addr: str) -> int | None:
    if not metrics_addr or metrics_addr == "0":
        return None
    port = metrics_addr.rpartition(":")[2]
    return int(port) if port.isdigit() and int(port) > 0 else None


def template_problem(listener: JSONDict) -> str | None:
    """Why the listener's `spec.template` cannot run, in one line; None when it can. ARC's
    listener knows neither standby replicas nor scaling policies: with either, it would run
    two sessions at once or scale without the policy."""
    if not runs_arc_listener(listener):
        return None
    spec = listener.get("spec") or {}
    missing = [
        feature
        for feature, used in (
            (f"listenerReplicas {listener_replicas(listener)}", listener_replicas(listener) > 1),
            ("scalingPolicy", spec.get("scalingPolicy") is not None),
        )
        if used
    ]
    if not missing:
        return None
    return (
        f"listenerTemplate runs ARC's listener ({listener_image(listener)}), which does not "
        f"support {' or '.join(missing)}: remove the image from the listener container of "
        "listenerTemplate, or set its command to a listener that supports them"
    )


TEMPLATE_METADATA_FIELDS = ("labels", "annotations")
TEMPLATE_POD_FIELDS = (
    "containers",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priorityClassName",
)
TEMPLATE_CONTAINER_FIELDS = ("name", "resources", "env")
TEMPLATE_ENV_SOURCES = ("fieldRef", "resourceFieldRef")
TEMPLATE_ENV_REFUSED_PREFIXES = ("LD_", "PYTHON", "LISTENER_")
"""Variables that choose what the listener loads or does: the dynamic linker's and the
interpreter's paths and hooks, and the listener's own settings, each of which overrides the
config the controller wrote (`LISTENER_CONFIG_PATH`, `LISTENER_CONFIGURE_URL`: where the set's
credentials go; `LISTENER_ALLOW_INSECURE_GITHUB`: whether over plain http)."""
TEMPLATE_ENV_LISTENER_ALLOWED = (
    "LISTENER_LOG_LEVEL",
    "LISTENER_LOG_FORMAT",
    "LISTENER_LIBRARY_LOG_LEVEL",
)
"""The listener's settings a template may still set: what its log says, never where it goes."""


def template_refusals(template: JSONDict | None) -> list[str]:
    """What `listenerTemplate` sets beyond what a listener needs tuned, as field paths under
    it (docs/security.md#listener-pod); [] when the pod may be made from it. Allowed: labels and
    annotations; the scheduling fields; in the container named `listener` only `resources` and
    `env` whose values are literal or from the pod's own fields (a `secretKeyRef` would read a
    Secret of the controller's namespace, where every listener's credentials are)."""
    if not template:
        return []
    refused: list[str] = [key for key in template if key not in ("metadata", "spec")]
    meta = template.get("metadata") or {}
    refused += [f"metadata.{key}" for key in meta if key not in TEMPLATE_METADATA_FIELDS]
    spec = template.get("spec") or {}
    refused += [
        f"spec.{key}"
        for key, value in spec.items()
        if key not in TEMPLATE_POD_FIELDS and value is not None
    ]
    for i, container in enumerate(spec.get("containers") or []):
        at = f"spec.containers[{i}]"
        if not isinstance(container, dict) or container.get("name") != LISTENER_CONTAINER:
            refused.append(at)
            continue
        refused += [
            f"{at}.{key}"
            for key, value in container.items()
            if key not in TEMPLATE_CONTAINER_FIELDS and value is not None
        ]
        for j, variable in enumerate(container.get("env") or []):
            if not isinstance(variable, dict):
                refused.append(f"{at}.env[{j}]")
                continue
            name = str(variable.get("name", ""))
            if (
                name.startswith(TEMPLATE_ENV_REFUSED_PREFIXES)
                and name not in TEMPLATE_ENV_LISTENER_ALLOWED
            ):
                refused.append(f"{at}.env[{j}].name")
            refused += [
                f"{at}.env[{j}].valueFrom.{source}"
                for source in variable.get("valueFrom") or {}
                if source not in TEMPLATE_ENV_SOURCES
            ]
    return refused


def _container(
    listener: JSONDict,
    *,
    metrics_addr: str,
    entrypoint: str,
    arc: bool,
    resources: Mapping[str, Mapping[str, str]],
    config_path: str,
) -> JSONDict:
    spec = listener.get("spec") or {}
    env: list[JSONDict] = [{"name": ENV_LISTENER_CONFIG_PATH, "value": config_path}]
    proxy = spec.get("proxy") or {}
    proxy_name = f"{metadata_of(listener)['name']}-proxy"
    for variable, present in (
        (ENV_HTTP_PROXY, bool(proxy.get("http"))),
        (ENV_HTTPS_PROXY, bool(proxy.get("https"))),
        (ENV_NO_PROXY, bool(proxy.get("noProxy"))),
    ):
        if present:
            env.append(
                {
                    "name": variable,
                    "valueFrom": {"secretKeyRef": {"name": proxy_name, "key": variable}},
                }
            )
    container: JSONDict = {
        "name": LISTENER_CONTAINER,
        "image": spec.get("image", ""),
        "command": [ARC_ENTRYPOINT if arc else entrypoint],
        "env": env,
        "volumeMounts": [
            {
                "name": LISTENER_CONFIG_VOLUME,
                "mountPath": LISTENER_CONFIG_MOUNT_PATH,
                "readOnly": True,
            }
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if resources:
        container["resources"] = {part: dict(values) for part, values in resources.items()}
    port = _metrics_port(metrics_addr)
    if port is not None:
        container["ports"] = [{"name": METRICS_PORT_NAME, "containerPort": port, "protocol": "TCP"}]
        if not arc:
            # Liveness and readiness wait for the startup probe, which waits for the process to
            # listen: neither is sent to a port nobody listens on yet.
            container["startupProbe"] = {
                "httpGet": {"path": "/healthz", "port": METRICS_PORT_NAME},
                "initialDelaySeconds": STARTUP_DELAY_SECONDS,
                "periodSeconds": 1,
                "failureThreshold": 60,
            }
            container["livenessProbe"] = {
                "httpGet": {"path": "/healthz", "port": METRICS_PORT_NAME},
                "periodSeconds": 20,
                "failureThreshold": 3,
            }
            container["readinessProbe"] = {
                "httpGet": {"path": "/readyz", "port": METRICS_PORT_NAME},
                "periodSeconds": 10,
            }
    return container


def listener_pod(
    listener: JSONDict,
    *,
    config_digest: str,
    metrics_addr: str,
    replica: int = 0,
    entrypoint: str = LISTENER_COMMAND,
    resources: Mapping[str, Mapping[str, str]] | None = None,
    config_path: str = LISTENER_CONFIG_PATH,
) -> JSONDict:
    """The listener pod of `replica`, with `spec.template` merged over it (`merge_template`).
    Replicas differ in their name only. The container runs `entrypoint` (ARC's
    `LISTENER_ENTRYPOINT`), or `/ghalistener` when it runs ARC's image. `runAsNonRoot`, uid
    and gid 10001 and the seccomp profile are the pod's, unless a trusted template adds
    containers: theirs are the template's to set, so ours are set on the listener container
    only. `resources` replaces the default requests and limits (the controller's setting);
    `config_path` is what `LISTENER_CONFIG_PATH` names (a listener group's: the folder of its
    members' configs)."""
    meta = metadata_of(listener)
    spec = listener.get("spec") or {}
    template_spec = (spec.get("template") or {}).get("spec") or {}
    container = _container(
        listener,
        metrics_addr=metrics_addr,
        entrypoint=entrypoint,
        arc=runs_arc_listener(listener),
        resources=LISTENER_RESOURCES if resources is None else resources,
        config_path=config_path,
    )
    restricted: JSONDict = {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod_spec: JSONDict = {
        "serviceAccountName": meta["name"],
        "automountServiceAccountToken": True,
        "nodeSelector": {LABEL_OS: OS_LINUX},
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": GRACE_PERIOD_SECONDS,
        "securityContext": restricted,
        "containers": [container],
        "volumes": [
            {"name": LISTENER_CONFIG_VOLUME, "secret": {"secretName": f"{meta['name']}-config"}}
        ],
    }
    if template_spec.get("initContainers") or any(
        c.get("name") != LISTENER_CONTAINER for c in template_spec.get("containers") or []
    ):
        del pod_spec["securityContext"]
        container["securityContext"].update(restricted)
    if spec.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = spec["imagePullSecrets"]
    pod: JSONDict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(listener, replica),
            "namespace": meta["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "annotations": {},
            "ownerReferences": [owner_reference(listener)],
        },
        "spec": pod_spec,
    }
    merged = merge_template(pod, spec.get("template"))
    merged["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH] = json_digest(
        [merged["spec"], merged["metadata"]["labels"], config_digest]
    )
    return merged


_APPENDED = ("env", "args", "ports", "envFrom", "volumeMounts", "volumeDevices")


def merge_template(pod: JSONDict, template: JSONDict | None) -> JSONDict:
    """`spec.template` over the listener pod (docs/autoscaling.md#the-listener-pod): template
    labels and annotations fill in absent keys; the container named `listener` takes the
    template's image and command when set, appends its env, args, ports and mounts and takes
    every other field it sets; other containers and volumes are appended; a pod field the
    template sets replaces ours. Unlike ARC, a field the template leaves unset keeps our value
    (ARC zeroes the 60 s grace period and more)."""
    if not template:
        return pod
    out = copy.deepcopy(pod)
    tmeta = template.get("metadata") or {}
    for key in ("labels", "annotations"):
        for name, value in (tmeta.get(key) or {}).items():
            out["metadata"][key].setdefault(name, value)
    tspec = template.get("spec") or {}
    ours = out["spec"]
    for container in tspec.get("containers") or []:
        if container.get("name") != LISTENER_CONTAINER:
            ours["containers"].append(container)
            continue
        target = ours["containers"][0]
        for field, value in container.items():
            if field == "name" or value in (None, "", [], {}):
                continue
            if field in _APPENDED:
                target[field] = [*(target.get(field) or []), *value]
            else:
                target[field] = value
    for field, value in tspec.items():
        if field in ("containers", "serviceAccountName", "serviceAccount") or value is None:
            continue
        if field == "volumes":
            ours["volumes"] = [*ours["volumes"], *value]
        else:
            ours[field] = value
    return out
