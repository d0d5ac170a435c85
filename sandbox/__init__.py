"""The emulators of the Kubernetes API server and the Actions service, and the demo on them."""

from pathlib import Path

MANIFESTS = Path(__file__).resolve().parent / "manifests"
"""The project's manifests (CRDs, RBAC, the install kustomization): in a checkout the symlink
sandbox/manifests -> ../manifests, in an installed gha-sandbox the same files as package data
(sandbox/pyproject.toml)."""
