"""Logging, metrics and tracing shared by the listener and the controller."""
