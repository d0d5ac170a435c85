"""Containers of this project's image run as real processes (docs/sandbox-kube.md, "Running the
project's image").

A container whose image is the project's (`gha-runner-scaler[:tag]`, any registry) runs the
console script its command names from the directory of this interpreter (`.venv/bin`), with the
container's resolved environment. Everything else goes to the fallback runtime.

The process gets a per-pod directory standing in for the container's filesystem:

- each volume mount (Secret, ConfigMap, projected Secret/ConfigMap/token, emptyDir) is written
  under `<pod dir>/root/<mountPath>`; args and environment values that name a path under a
  mount path are rewritten to the same path under `<pod dir>/root`;
- the ServiceAccount's token, the cluster CA and the namespace are written to
  `<pod dir>/root/var/run/secrets/kubernetes.io/serviceaccount/`, and since no process can read
  the real in-cluster path, `KUBECONFIG` names a kubeconfig with the same token, CA and the
  emulator's URL (`KUBERNETES_SERVICE_HOST`/`PORT` point at the emulator too);
- the pod's loopback address (127.A.B.x for pod IP 10.244.X.x on any node, A.B drawn per
  runtime so that emulators running side by side do not collide) is where its servers listen:
  the known processes get it through their own bind-address settings, and readiness probes go
  there.

Cancelling `run` (pod deletion or emulator stop) sends SIGTERM, then SIGKILL once the pod's grace
period is over; the process's exit code is returned either way. Each process is started through
`sandbox.leash`, so it dies with the emulator even when the emulator is killed without stopping
it (docs/sandbox.md#processes).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sandbox import leash
from sandbox.kube.kubelet.runtime import ContainerRuntime
from sandbox.kube.store import Store

Obj = dict[str, Any]
log = logging.getLogger("sandbox.kube.kubelet")

PROJECT_IMAGE = "gha-runner-scaler"
ROOT_PREFIX = "sandbox-kubelet-"
"""Each runtime's pod directories live in `<tmp>/sandbox-kubelet-<pid>-xxxx`."""
# The image's CMD (Dockerfile), used when a container gives no command.
DEFAULT_COMMAND = ("gha-listener",)
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# How each of the project's processes is told which address to listen on; the port stays the
# one the process would use anyway.
LISTEN_SETTINGS: dict[str, Callable[[str, dict[str, str]], dict[str, str]]] = {
    "gha-controller": lambda ip, env: {"GHA_CONTROLLER_BIND_ADDRESS": ip},
    "gha-listener": lambda ip, env: {"LISTENER_METRICS_ADDR": f"{ip}:{_listener_port(env)}"},
}
NOT_FOUND_EXIT = 127


def _listener_port(env: dict[str, str]) -> str:
    """The port of gha-listener's metrics_addr (its environment, else its config file, or the
    first of the folder of config files a listener group's pod reads: they agree on it)."""
    addr = env.get("LISTENER_METRICS_ADDR")
    if addr is None:
        with contextlib.suppress(OSError, ValueError, AttributeError, StopIteration):
            path = Path(env.get("LISTENER_CONFIG_PATH", ""))
            if path.is_dir():
                path = next(iter(sorted(path.glob("*.json"))))
            config = json.loads(path.read_text())
            addr = str(config.get("metrics_addr", ":8080"))
    _, _, port = (addr or ":8080").rpartition(":")
    return port or "8080"


def image_repository(image: str) -> str:
    """`registry/path/name:tag@digest` -> `name`."""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def sweep_stale_roots(tmp: Path) -> list[Path]:
    """Remove the pod directories of runtimes whose process is gone (an emulator killed before
    it could remove its own: its processes died with it, by `sandbox.leash`); what it removed."""
    removed = []
    for path in tmp.glob(f"{ROOT_PREFIX}*-*"):
        pid = path.name.removeprefix(ROOT_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


@dataclass
class ClusterAccess:
    """What a process needs to reach the emulator as its ServiceAccount."""

    url: Callable[[], str]
    ca_pem: bytes
    token_for: Callable[[str, str], str]


class ProcessRuntime:
    """A ContainerRuntime that runs the project's image as local processes."""

    def __init__(
        self,
        *,
        store: Store,
        cluster: ClusterAccess,
        fallback: ContainerRuntime,
        image: str = PROJECT_IMAGE,
        bin_dir: Path | None = None,
        stop_grace: float = 5.0,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.fallback = fallback
        self.image = image
        self.bin_dir = bin_dir or Path(sys.executable).parent
        self.stop_grace = stop_grace
        sweep_stale_roots(Path(tempfile.gettempdir()))
        self._root = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-"))
        self._network = f"127.{random.randint(64, 254)}.{random.randint(0, 255)}"

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)

    def runs(self, container: Obj) -> bool:
        return image_repository(str(container.get("image", ""))) == self.image

    def loopback_address(self, pod: Obj) -> str:
        """The loopback address standing in for the pod's IP: 10.244.0.7 -> 127.A.B.7."""
        ip = str((pod.get("status") or {}).get("podIP") or "")
        return f"{self._network}.{ip.rsplit('.', 1)[-1]}" if ip.count(".") == 3 else "127.0.0.1"

    def probe_host(self, *, pod: Obj, container: Obj) -> str | None:
        """Where the kubelet sends this container's probes; None when nothing listens."""
        return self.loopback_address(pod) if self.runs(container) else None

    def pod_dir(self, pod: Obj) -> Path:
        meta = pod["metadata"]
        return self._root / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"

    def log_path(self, pod: Obj, container: str) -> Path:
        return self.pod_dir(pod) / f"{container}.log"

    def logs(self, pod: Obj, container: str) -> str:
        """What the container's process wrote so far (every run, restarts included)."""
        try:
            return self.log_path(pod, container).read_text(errors="replace")
        except OSError:
            return ""

    async def run(self, *, pod: Obj, container: Obj, env: dict[str, str]) -> int:
        if not self.runs(container):
            return await self.fallback.run(pod=pod, container=container, env=env)
        pod_dir = self.pod_dir(pod)
        root = pod_dir / "root"
        mounts = self._populate(pod, container, root)
        process_env = self._environment(pod, container, env, root, mounts, pod_dir)
        argv = [
            _rewrite(a, root, mounts)
            for a in [
                *(container.get("command") or DEFAULT_COMMAND),
                *(container.get("args") or []),
            ]
        ]
        executable = (
            shutil.which(argv[0], path=str(self.bin_dir)) if "/" not in argv[0] else argv[0]
        )
        if executable is None:
            log.warning(
                "container %s: %s not found in %s", container["name"], argv[0], self.bin_dir
            )
            return NOT_FOUND_EXIT
        listen = LISTEN_SETTINGS.get(Path(argv[0]).name)
        if listen is not None:
            process_env.update(listen(self.loopback_address(pod), process_env))
        with self.log_path(pod, container["name"]).open("ab") as output:
            proc = await asyncio.create_subprocess_exec(
                *leash.command(executable, *argv[1:]),
                env=process_env,
                cwd=str(pod_dir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            return _exit_code(await proc.wait())
        except asyncio.CancelledError:
            return await self._stop(proc, pod)

    async def _stop(self, proc: asyncio.subprocess.Process, pod: Obj) -> int:
        """SIGTERM, then SIGKILL after the grace period: the pod's if it is being deleted, else
        (the emulator is stopping) `stop_grace`."""
        current = self.store.by_uid(pod["metadata"]["uid"]) or pod
        grace = current["metadata"].get("deletionGracePeriodSeconds")
        seconds = float(grace) if grace is not None else self.stop_grace
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(seconds):
                return _exit_code(await asyncio.shield(proc.wait()))
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return _exit_code(await proc.wait())

    # --- the container's filesystem and environment ------------------------------------------

    def _populate(self, pod: Obj, container: Obj, root: Path) -> list[str]:
        """Write the container's volumes under `root`; returns the mapped mount paths."""
        spec = pod.get("spec") or {}
        ns = pod["metadata"]["namespace"]
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        mounts = []
        for mount in container.get("volumeMounts") or []:
            path = str(mount.get("mountPath", ""))
            volume = volumes.get(mount.get("name"))
            if not path.startswith("/") or volume is None:
                continue
            files = self._volume_files(ns, volume, pod)
            target = root / path.lstrip("/")
            sub = str(mount.get("subPath") or "")
            if sub:
                if sub in files:
                    _write(target, files[sub])
                else:
                    target.mkdir(parents=True, exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                for name, data in files.items():
                    _write(target / name, data)
            mounts.append(path)
        if spec.get("automountServiceAccountToken", True) is not False:
            sa_dir = root / SERVICE_ACCOUNT_DIR.lstrip("/")
            sa_dir.mkdir(parents=True, exist_ok=True)
            _write(sa_dir / "token", self._token(pod).encode())
            _write(sa_dir / "ca.crt", self.cluster.ca_pem)
            _write(sa_dir / "namespace", ns.encode())
            mounts.append(SERVICE_ACCOUNT_DIR)
        return sorted(mounts, key=len, reverse=True)

    def _token(self, pod: Obj) -> str:
        spec = pod.get("spec") or {}
        sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        return self.cluster.token_for(pod["metadata"]["namespace"], sa)

    def _volume_files(self, ns: str, volume: Obj, pod: Obj) -> dict[str, bytes]:
        if "secret" in volume:
            src = volume["secret"] or {}
            return self._object_files(ns, "secrets", src.get("secretName", ""), src)
        if "configMap" in volume:
            src = volume["configMap"] or {}
            return self._object_files(ns, "configmaps", src.get("name", ""), src)
        if "projected" in volume:
            files: dict[str, bytes] = {}
            for source in (volume["projected"] or {}).get("sources") or []:
                if "secret" in source:
                    src = source["secret"] or {}
                    files |= self._object_files(ns, "secrets", src.get("name", ""), src)
                elif "configMap" in source:
                    src = source["configMap"] or {}
                    files |= self._object_files(ns, "configmaps", src.get("name", ""), src)
                elif "serviceAccountToken" in source:
                    path = (source["serviceAccountToken"] or {}).get("path", "token")
                    files[path] = self._token(pod).encode()
            return files
        return {}

    def _object_files(self, ns: str, plural: str, name: str, src: Obj) -> dict[str, bytes]:
        obj = self.store.get(("", plural), ns, name)
        if obj is None:
            if src.get("optional"):
                return {}
            raise FileNotFoundError(f'{plural[:-1]} "{name}" not found')
        content: dict[str, bytes] = {}
        if plural == "secrets":
            for key, value in (obj.get("data") or {}).items():
                content[key] = base64.b64decode(value)
        else:
            for key, value in (obj.get("data") or {}).items():
                content[key] = str(value).encode()
            for key, value in (obj.get("binaryData") or {}).items():
                content[key] = base64.b64decode(value)
        items = src.get("items")
        if not items:
            return content
        return {
            str(item.get("path") or item["key"]): content[item["key"]]
            for item in items
            if item.get("key") in content
        }

    def _environment(
        self,
        pod: Obj,
        container: Obj,
        env: dict[str, str],
        root: Path,
        mounts: list[str],
        pod_dir: Path,
    ) -> dict[str, str]:
        url = self.cluster.url()
        host, _, port = url.split("://", 1)[-1].rpartition(":")
        kubeconfig = pod_dir / f"{container['name']}.kubeconfig"
        cluster: Obj = {"server": url}
        if url.startswith("https:"):
            cluster["certificate-authority-data"] = base64.b64encode(self.cluster.ca_pem).decode()
        _write(
            kubeconfig,
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "in-cluster", "cluster": cluster}],
                    "users": [{"name": "service-account", "user": {"token": self._token(pod)}}],
                    "contexts": [
                        {
                            "name": "in-cluster",
                            "context": {
                                "cluster": "in-cluster",
                                "user": "service-account",
                                "namespace": pod["metadata"]["namespace"],
                            },
                        }
                    ],
                    "current-context": "in-cluster",
                }
            ).encode(),
            mode=0o600,
        )
        tmp = root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        out = {
            "PATH": f"{self.bin_dir}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": str(pod_dir),
            "TMPDIR": str(tmp),
            "HOSTNAME": pod["metadata"]["name"],
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
            "KUBECONFIG": str(kubeconfig),
        }
        out.update({k: _rewrite(v, root, mounts) for k, v in env.items()})
        return out


def _rewrite(value: str, root: Path, mounts: list[str]) -> str:
    """`/etc/x/y` (or `--flag=/etc/x/y`) under a mount path -> the same path under `root`."""
    prefix, sep, path = value.partition("=") if value.startswith("-") else ("", "", value)
    for mount in mounts:
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            return f"{prefix}{sep}{root}{path}"
    return value


def _write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)


def _exit_code(returncode: int) -> int:
    """A process killed by signal N exits 128 + N, as a container runtime reports it."""
    return 128 - returncode if returncode < 0 else returncode
