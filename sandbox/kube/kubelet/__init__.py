"""A simulated scheduler + kubelet for one or more worker nodes: `scheduler` picks a pod's node,
`lifecycle` binds it and walks it through the status writes a real kubelet makes, `env` resolves
container environments, `node` makes the Node objects, `podstatus` the conditions and container
states, `runtime` the pluggable container runner."""

from sandbox.kube.kubelet.lifecycle import Kubelet
from sandbox.kube.kubelet.runtime import ContainerRuntime, RunUntilDeleted

__all__ = ["ContainerRuntime", "Kubelet", "RunUntilDeleted"]
