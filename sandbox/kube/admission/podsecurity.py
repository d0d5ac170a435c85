"""The PodSecurity admission plugin of a v1.32 API server (docs/sandbox-kube.md#pod-security).

A namespace's `pod-security.kubernetes.io/<mode>` labels (`enforce`, `warn`, with `-version`)
choose a level (`privileged`, `baseline`, `restricted`) and a policy version (`latest` or
`v1.<minor>`, capped at the server's 1.32). A pod created against the enforce level is refused
with 403 Forbidden, `pods "<name>" is forbidden: violates PodSecurity "<level>:<version>": ...`,
its reasons in the real plugin's order and words; a pod or a workload's pod template that the
warn level refuses gets the `would violate PodSecurity ...` warning. Without a `warn` label,
warn follows an explicit `enforce`. Labels that are not a level or a version are refused on the
namespace's create and update. The checks are those of the Pod Security Standards as the
1.32 plugin runs them, each at the policy versions it applies to; no cluster-wide defaults or
exemptions are configured (the real server's defaults: privileged, no exemptions).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sandbox.kube.status import Cause, forbidden, invalid

Obj = dict[str, Any]
PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
LEVELS = ("privileged", "baseline", "restricted")
SERVER_MINOR = 32
"""The emulator answers as v1.32 (sandbox/kube/discovery.py): newer versions and `latest` run
that policy."""
_VERSION = re.compile(r"^v1\.([0-9]|[1-9][0-9]*)$")

WORKLOAD_TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "podtemplates"): ("template",),
    ("", "replicationcontrollers"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}
"""Where each workload kind holds the pod template the plugin evaluates (warn mode only)."""


@dataclass(frozen=True, slots=True)
class LevelVersion:
    level: str
    minor: int | None
    """None: `latest`."""

    def __str__(self) -> str:
        return f"{self.level}:{'latest' if self.minor is None else f'v1.{self.minor}'}"

    @property
    def effective_minor(self) -> int:
        return SERVER_MINOR if self.minor is None else min(self.minor, SERVER_MINOR)


PRIVILEGED = LevelVersion("privileged", None)


@dataclass(frozen=True, slots=True)
class Policy:
    enforce: LevelVersion = PRIVILEGED
    warn: LevelVersion = PRIVILEGED


def namespace_policy(labels: Obj) -> tuple[Policy, list[Cause]]:
    """The namespace's policy and what is wrong with its labels. A level that cannot be read
    enforces `restricted` and warns nothing (the real plugin fails closed for enforce, open
    for warn and audit); a version that cannot be read is `latest`."""
    causes: list[Cause] = []
    found: dict[str, LevelVersion] = {}
    for mode in MODES:
        level, minor = "privileged", None
        if (raw := labels.get(PREFIX + mode)) is not None:
            if raw in LEVELS:
                level = raw
            else:
                level = "restricted" if mode == "enforce" else "privileged"
                causes.append(_label_cause(mode, raw, "must be one of " + ", ".join(LEVELS)))
        if (raw := labels.get(f"{PREFIX}{mode}-version")) is not None and raw != "latest":
            if match := _VERSION.match(str(raw)):
                minor = int(match.group(1))
            else:
                causes.append(_label_cause(f"{mode}-version", raw, 'must be "latest" or "v1.x"'))
        found[mode] = LevelVersion(level, minor)
    enforce, warn = found["enforce"], found["warn"]
    enforce_read = PREFIX + "enforce" in labels and labels[PREFIX + "enforce"] in LEVELS
    if (
        PREFIX + "warn" not in labels
        and enforce_read
        and LEVELS.index(enforce.level) > LEVELS.index(warn.level)
    ):
        warn = LevelVersion(
            enforce.level, warn.minor if f"{PREFIX}warn-version" in labels else enforce.minor
        )
    return Policy(enforce=enforce, warn=warn), causes


def _label_cause(label: str, value: object, why: str) -> Cause:
    return Cause(
        "FieldValueInvalid",
        field=f"metadata.labels[{PREFIX}{label}]",
        detail=f"{json.dumps(value)}: {why}",
    )


def namespace_causes(new: Obj, old: Obj | None) -> list[Cause]:
    """Why a namespace's labels are refused: on create, any label that cannot be read; on
    update, only when what is wrong with them changed."""
    causes = namespace_policy(_labels(new))[1]
    if old is not None and causes and causes == namespace_policy(_labels(old))[1]:
        return []
    return causes


def admit(
    resource: tuple[str, str],
    obj: Obj,
    old: Obj | None,
    *,
    namespace: Obj | None,
    warnings: list[str] | None,
) -> None:
    """The plugin on a create (`old` None) or an update of the main resource: namespaces'
    labels checked, pods enforced and warned about (an update only when it changes an image or
    the number of containers, as the real plugin), workloads' templates warned about."""
    if resource == ("", "namespaces"):
        causes = namespace_causes(obj, old)
        if causes:
            name = str((obj.get("metadata") or {}).get("name", ""))
            raise invalid("Namespace", group="", name=name, causes=causes)
    elif resource == ("", "pods"):
        if old is None or _significant(obj.get("spec") or {}, old.get("spec") or {}):
            admit_pod(namespace, obj, warnings)
    else:
        warn_workload(resource, namespace, obj, warnings)


def _significant(new: Obj, old: Obj) -> bool:
    def images(spec: Obj, key: str) -> list[object]:
        return [c.get("image") for c in spec.get(key) or [] if isinstance(c, dict)]

    return any(
        images(new, key) != images(old, key)
        for key in ("containers", "initContainers", "ephemeralContainers")
    )


def admit_pod(namespace: Obj | None, pod: Obj, warnings: list[str] | None) -> None:
    """Refuse `pod` (403) when the namespace's enforce level refuses it; else add the warn
    level's warning to `warnings`."""
    if namespace is None:
        return
    policy, _ = namespace_policy(_labels(namespace))
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    refused = evaluate(policy.enforce, meta, spec)
    if refused:
        raise forbidden(
            "pods",
            group="",
            name=str(meta.get("name", "")),
            why=f'violates PodSecurity "{policy.enforce}": {refused}',
        )
    _warn(policy.warn, meta, spec, warnings)


def warn_workload(
    resource: tuple[str, str], namespace: Obj | None, obj: Obj, warnings: list[str] | None
) -> None:
    """The warn level's warning for a workload's pod template (never refused: the pods it
    makes are)."""
    path = WORKLOAD_TEMPLATES.get(resource)
    if path is None or namespace is None:
        return
    template: Any = obj
    for key in path:
        template = template.get(key) if isinstance(template, dict) else None
    if not isinstance(template, dict):
        return
    policy, _ = namespace_policy(_labels(namespace))
    _warn(policy.warn, template.get("metadata") or {}, template.get("spec") or {}, warnings)


def _warn(level: LevelVersion, meta: Obj, spec: Obj, warnings: list[str] | None) -> None:
    if warnings is not None and (refused := evaluate(level, meta, spec)):
        warnings.append(f'would violate PodSecurity "{level}": {refused}')


def _labels(obj: Obj) -> Obj:
    return (obj.get("metadata") or {}).get("labels") or {}


def evaluate(level: LevelVersion, meta: Obj, spec: Obj) -> str:
    """Why `level` refuses the pod, as the real plugin words it ("" when it admits it): each
    failed check's reason, its detail in parentheses, joined by ", "."""
    if level.level == "privileged":
        return ""
    parts = []
    for check in _checks(level):
        result = check(meta, spec)
        if result is not None:
            reason, detail = result
            parts.append(f"{reason} ({detail})" if detail else reason)
    return ", ".join(parts)


# --- the checks ----------------------------------------------------------------------------------

Result = tuple[str, str] | None
CheckFn = Callable[[Obj, Obj], Result]


@dataclass(frozen=True, slots=True)
class _Version:
    since: int
    check: CheckFn
    overrides: tuple[str, ...] = ()


def _containers(spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                yield container


def _context(obj: Obj) -> Obj:
    value = obj.get("securityContext")
    return value if isinstance(value, dict) else {}


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _quoted(items: list[str]) -> str:
    return ", ".join(f'"{item}"' for item in items)


def _named(singular: str, plural: str, names: list[str]) -> str:
    return f"{_plural(singular, plural, len(names))} {_quoted(names)}"


def _setters(pod: bool, containers: list[str]) -> str:
    """ "pod", "container "a"", "pod and containers "a", "b"": who set a forbidden value."""
    who = ["pod"] if pod else []
    if containers:
        who.append(_named("container", "containers", containers))
    return " and ".join(who)


def _windows(spec: Obj) -> bool:
    return (spec.get("os") or {}).get("name") == "windows"


def _go_quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _app_armor(meta: Obj, spec: Obj) -> Result:
    allowed = ("RuntimeDefault", "Localhost")
    bad_values: set[str] = set()
    pod_profile = _context(spec).get("appArmorProfile")
    pod_bad = isinstance(pod_profile, dict) and pod_profile.get("type") not in allowed
    if pod_bad:
        bad_values.add(str(pod_profile.get("type", "")))  # type: ignore[union-attr]
    containers = []
    for c in _containers(spec):
        profile = _context(c).get("appArmorProfile")
        if isinstance(profile, dict) and profile.get("type") not in allowed:
            containers.append(str(c.get("name")))
            bad_values.add(str(profile.get("type", "")))
    annotations = sorted(
        f"{key}={_go_quote(str(value))}"
        for key, value in (meta.get("annotations") or {}).items()
        if key.startswith("container.apparmor.security.beta.kubernetes.io/")
        and value not in ("", "runtime/default")
        and not str(value).startswith("localhost/")
    )
    setters = [_setters(pod_bad, containers)] if pod_bad or containers else []
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    values = [*sorted(bad_values), *annotations]
    return (
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {_quoted(values)}",
    )


_DEFAULT_CAPABILITIES = frozenset(
    [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ]
)


def _capabilities_baseline(_meta: Obj, spec: Obj) -> Result:
    containers, added = [], set()
    for c in _containers(spec):
        extra = {
            str(cap)
            for cap in (_context(c).get("capabilities") or {}).get("add") or []
            if cap not in _DEFAULT_CAPABILITIES
        }
        if extra:
            containers.append(str(c.get("name")))
            added |= extra
    if not containers:
        return None
    return (
        "non-default capabilities",
        f"{_named('container', 'containers', containers)} must not include "
        f"{_quoted(sorted(added))} in securityContext.capabilities.add",
    )


def _host_namespaces(_meta: Obj, spec: Obj) -> Result:
    used = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return ("host namespaces", ", ".join(used)) if used else None


def _host_path_volumes(_meta: Obj, spec: Obj) -> Result:
    names = [str(v.get("name")) for v in spec.get("volumes") or [] if v.get("hostPath") is not None]
    return ("hostPath volumes", _named("volume", "volumes", names)) if names else None


def _host_ports(_meta: Obj, spec: Obj) -> Result:
    containers, ports = [], set()
    for c in _containers(spec):
        used = {str(p.get("hostPort")) for p in c.get("ports") or [] if p.get("hostPort")}
        if used:
            containers.append(str(c.get("name")))
            ports |= used
    if not containers:
        return None
    return (
        "hostPort",
        f"{_named('container', 'containers', containers)} "
        f"{_plural('uses', 'use', len(containers))} "
        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


def _privileged(_meta: Obj, spec: Obj) -> Result:
    names = [str(c.get("name")) for c in _containers(spec) if _context(c).get("privileged") is True]
    if not names:
        return None
    return (
        "privileged",
        f"{_named('container', 'containers', names)} must not set securityContext.privileged=true",
    )


def _proc_mount(_meta: Obj, spec: Obj) -> Result:
    containers, kinds = [], set()
    for c in _containers(spec):
        mount = _context(c).get("procMount")
        if mount is not None and mount != "Default":
            containers.append(str(c.get("name")))
            kinds.add(str(mount))
    if not containers:
        return None
    return (
        "procMount",
        f"{_named('container', 'containers', containers)} must not set "
        f"securityContext.procMount to {_quoted(sorted(kinds))}",
    )


def _se_linux(types: frozenset[str]) -> CheckFn:
    def check(_meta: Obj, spec: Obj) -> Result:
        bad_types: set[str] = set()
        user = role = False

        def bad(options: object) -> bool:
            nonlocal user, role
            if not isinstance(options, dict):
                return False
            wrong = False
            if options.get("type", "") not in types:
                bad_types.add(str(options.get("type")))
                wrong = True
            if options.get("user"):
                user = wrong = True
            if options.get("role"):
                role = wrong = True
            return wrong

        pod = bad(_context(spec).get("seLinuxOptions"))
        containers = [
            str(c.get("name")) for c in _containers(spec) if bad(_context(c).get("seLinuxOptions"))
        ]
        if not pod and not containers:
            return None
        data = [_named("type", "types", sorted(bad_types))] if bad_types else []
        data += ["user may not be set"] if user else []
        data += ["role may not be set"] if role else []
        return (
            "seLinuxOptions",
            f"{_setters(pod, containers)} set forbidden securityContext.seLinuxOptions: "
            + "; ".join(data),
        )

    return check


_SE_LINUX_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
_SECCOMP_TYPES = ("RuntimeDefault", "Localhost")


def _seccomp_annotations(meta: Obj, spec: Obj) -> Result:
    annotations = meta.get("annotations") or {}
    keys = ["seccomp.security.alpha.kubernetes.io/pod"] + [
        f"container.seccomp.security.alpha.kubernetes.io/{c.get('name')}" for c in _containers(spec)
    ]
    bad = {
        f"{key}={_go_quote(str(annotations[key]))}"
        for key in keys
        if key in annotations
        and annotations[key] not in ("runtime/default", "docker/default")
        and not str(annotations[key]).startswith("localhost/")
    }
    if not bad:
        return None
    return (
        "seccompProfile",
        f"forbidden {_plural('annotation', 'annotations', len(bad))} {', '.join(sorted(bad))}",
    )


def _seccomp(*, required: bool) -> CheckFn:
    """Baseline forbids a profile type other than RuntimeDefault or Localhost; restricted also
    requires one, on the pod or on every container."""

    def check(_meta: Obj, spec: Obj) -> Result:
        values: set[str] = set()
        pod_profile = _context(spec).get("seccompProfile")
        pod_bad = isinstance(pod_profile, dict) and pod_profile.get("type") not in _SECCOMP_TYPES
        if pod_bad:
            values.add(str(pod_profile.get("type", "")))  # type: ignore[union-attr]
        pod_set = isinstance(pod_profile, dict) and not pod_bad
        explicit, implicit = [], []
        for c in _containers(spec):
            profile = _context(c).get("seccompProfile")
            if isinstance(profile, dict):
                if profile.get("type") not in _SECCOMP_TYPES:
                    explicit.append(str(c.get("name")))
                    values.add(str(profile.get("type", "")))
            elif not pod_set:
                implicit.append(str(c.get("name")))
        if pod_bad or explicit:
            return (
                "seccompProfile",
                f"{_setters(pod_bad, explicit)} must not set securityContext.seccompProfile.type "
                f"to {_quoted(sorted(values))}",
            )
        if required and implicit:
            return (
                "seccompProfile",
                f"pod or {_named('container', 'containers', implicit)} must set "
                'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
            )
        return None

    return check


def _unless_windows(check: CheckFn) -> CheckFn:
    """From policy 1.25 on, a pod with `os.name: windows` is exempt (its API validation forbids
    these Linux fields)."""

    def exempting(meta: Obj, spec: Obj) -> Result:
        return None if _windows(spec) else check(meta, spec)

    return exempting


_SYSCTLS_1_0 = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
_SYSCTLS_1_27 = _SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SYSCTLS_1_29 = _SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
_SYSCTLS_1_32 = _SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    def check(_meta: Obj, spec: Obj) -> Result:
        names = [
            str(s.get("name"))
            for s in _context(spec).get("sysctls") or []
            if s.get("name") not in allowed
        ]
        return ("forbidden sysctls", ", ".join(names)) if names else None

    return check


def _host_process(_meta: Obj, spec: Obj) -> Result:
    def on(context: Obj) -> bool:
        return (context.get("windowsOptions") or {}).get("hostProcess") is True

    containers = [str(c.get("name")) for c in _containers(spec) if on(_context(c))]
    pod = on(_context(spec))
    if not pod and not containers:
        return None
    return (
        "hostProcess",
        f"{_setters(pod, containers)} must not set securityContext.windowsOptions.hostProcess=true",
    )


def _allow_privilege_escalation(_meta: Obj, spec: Obj) -> Result:
    names = [
        str(c.get("name"))
        for c in _containers(spec)
        if _context(c).get("allowPrivilegeEscalation") is not False
    ]
    if not names:
        return None
    return (
        "allowPrivilegeEscalation != false",
        f"{_named('container', 'containers', names)} must set "
        "securityContext.allowPrivilegeEscalation=false",
    )


def _capabilities_restricted(_meta: Obj, spec: Obj) -> Result:
    missing, adding, added = [], [], set()
    for c in _containers(spec):
        capabilities = _context(c).get("capabilities")
        if not isinstance(capabilities, dict):
            missing.append(str(c.get("name")))
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing.append(str(c.get("name")))
        extra = {str(cap) for cap in capabilities.get("add") or [] if cap != "NET_BIND_SERVICE"}
        if extra:
            adding.append(str(c.get("name")))
            added |= extra
    details = []
    if missing:
        details.append(
            f"{_named('container', 'containers', missing)} must set "
            'securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_named('container', 'containers', adding)} must not include "
            f"{_quoted(sorted(added))} in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


_ALLOWED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
_KNOWN_VOLUMES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)


def _restricted_volumes(_meta: Obj, spec: Obj) -> Result:
    names, types = [], set()
    for volume in spec.get("volumes") or []:
        sources = [key for key in volume if key != "name" and volume[key] is not None]
        if any(key in _ALLOWED_VOLUMES for key in sources):
            continue
        names.append(str(volume.get("name")))
        # 1.32's plugin does not know the `image` source yet: "unknown", as there.
        types.add(next((key for key in _KNOWN_VOLUMES if key in sources), "unknown"))
    if not names:
        return None
    return (
        "restricted volume types",
        f"{_named('volume', 'volumes', names)} {_plural('uses', 'use', len(names))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(types))} "
        f"{_quoted(sorted(types))}",
    )


def _run_as_non_root(_meta: Obj, spec: Obj) -> Result:
    pod_value = _context(spec).get("runAsNonRoot")
    pod_bad, pod_set = pod_value is False, pod_value is True
    explicit, implicit = [], []
    for c in _containers(spec):
        value = _context(c).get("runAsNonRoot")
        if value is not None:
            if value is False:
                explicit.append(str(c.get("name")))
        elif not pod_set:
            implicit.append(str(c.get("name")))
    if pod_bad or explicit:
        return (
            "runAsNonRoot != true",
            f"{_setters(pod_bad, explicit)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return (
            "runAsNonRoot != true",
            f"pod or {_named('container', 'containers', implicit)} must set "
            "securityContext.runAsNonRoot=true",
        )
    return None


def _run_as_user(_meta: Obj, spec: Obj) -> Result:
    pod = _context(spec).get("runAsUser") == 0
    containers = [
        str(c.get("name")) for c in _containers(spec) if _context(c).get("runAsUser") == 0
    ]
    if not pod and not containers:
        return None
    return ("runAsUser=0", f"{_setters(pod, containers)} must not set runAsUser=0")


_BASELINE: dict[str, tuple[_Version, ...]] = {
    # In the real plugin's order: check ids sorted bytewise, baseline before restricted.
    "appArmorProfile": (_Version(0, _app_armor),),
    "capabilities_baseline": (_Version(0, _capabilities_baseline),),
    "hostNamespaces": (_Version(0, _host_namespaces),),
    "hostPathVolumes": (_Version(0, _host_path_volumes),),
    "hostPorts": (_Version(0, _host_ports),),
    "privileged": (_Version(0, _privileged),),
    "procMount": (_Version(0, _proc_mount),),
    "seLinuxOptions": (
        _Version(0, _se_linux(_SE_LINUX_1_0)),
        _Version(31, _se_linux(_SE_LINUX_1_0 | {"container_engine_t"})),
    ),
    "seccompProfile_baseline": (
        _Version(0, _seccomp_annotations),
        _Version(19, _seccomp(required=False)),
    ),
    "sysctls": (
        _Version(0, _sysctls(_SYSCTLS_1_0)),
        _Version(27, _sysctls(_SYSCTLS_1_27)),
        _Version(29, _sysctls(_SYSCTLS_1_29)),
        _Version(32, _sysctls(_SYSCTLS_1_32)),
    ),
    "windowsHostProcess": (_Version(0, _host_process),),
}
_RESTRICTED: dict[str, tuple[_Version, ...]] = {
    "allowPrivilegeEscalation": (
        _Version(8, _allow_privilege_escalation),
        _Version(25, _unless_windows(_allow_privilege_escalation)),
    ),
    "capabilities_restricted": (
        _Version(22, _capabilities_restricted, ("capabilities_baseline",)),
        _Version(25, _unless_windows(_capabilities_restricted), ("capabilities_baseline",)),
    ),
    "restrictedVolumes": (_Version(0, _restricted_volumes, ("hostPathVolumes",)),),
    "runAsNonRoot": (_Version(0, _run_as_non_root),),
    "runAsUser": (_Version(23, _run_as_user),),
    "seccompProfile_restricted": (
        _Version(19, _seccomp(required=True), ("seccompProfile_baseline",)),
        _Version(25, _unless_windows(_seccomp(required=True)), ("seccompProfile_baseline",)),
    ),
}


def _at(versions: tuple[_Version, ...], minor: int) -> _Version | None:
    """The revision of a check that policy version 1.`minor` runs, None before its first."""
    current = None
    for version in versions:
        if version.since <= minor:
            current = version
    return current


def _checks(level: LevelVersion) -> list[CheckFn]:
    minor = level.effective_minor
    restricted = {}
    if level.level == "restricted":
        restricted = {
            name: found for name, versions in _RESTRICTED.items() if (found := _at(versions, minor))
        }
    overridden = {name for version in restricted.values() for name in version.overrides}
    baseline = [
        found.check
        for name, versions in _BASELINE.items()
        if name not in overridden and (found := _at(versions, minor))
    ]
    return baseline + [version.check for version in restricted.values()]
