"""Admission plugins of the Kubernetes emulator, run on the write path (sandbox.kube.registry)."""
