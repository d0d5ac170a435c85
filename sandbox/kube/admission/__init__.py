"""Admission plugins of the emulated API server, called from the registry's write path."""
