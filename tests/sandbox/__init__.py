"""Tests of the sandbox: the Kubernetes and Actions emulators and the demo."""
