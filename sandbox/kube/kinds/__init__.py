"""Per-kind strategies of the write path: what the registry does differently for pods,
namespaces, secrets and CustomResourceDefinitions (defaults on create, update rules, deletion,
and what a write changes beyond the object). The generic path is `sandbox.kube.registry`."""
