"""Kubernetes helpers shared by the listener and the controller."""
