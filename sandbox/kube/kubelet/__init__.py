"""A simulated scheduler + kubelet for one node: `lifecycle` walks each pod through the status
writes a real kubelet makes, `env` resolves container environments, `node` is the Node object,
`podstatus` the conditions and container states, `runtime` the pluggable container runner."""

from sandbox.kube.kubelet.lifecycle import Kubelet
from sandbox.kube.kubelet.runtime import ContainerRuntime, RunUntilDeleted

__all__ = ["ContainerRuntime", "Kubelet", "RunUntilDeleted"]
