"""An emulator of the Kubernetes API server that kubernetes-asyncio and kubectl accept.

`KubeEmulator` serves the API with a simulated kubelet and controller-manager on loopback;
`ContainerRuntime` is the kubelet's pluggable container runner. See docs/sandbox-kube.md.
"""

from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.kubelet.runtime import ContainerRuntime, RunUntilDeleted

__all__ = ["ContainerRuntime", "KubeEmulator", "RunUntilDeleted"]
