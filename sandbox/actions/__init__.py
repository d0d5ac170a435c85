"""An emulator of GitHub's token endpoints and the GitHub Actions runner scale set service."""

from sandbox.actions.credentials import AppCredentials
from sandbox.actions.emulator import ActionsEmulator
from sandbox.actions.faults import ENDPOINTS, Fault, Faults
from sandbox.actions.runtime import EXIT_OUTDATED, JIT_CONFIG_ENV, RunnerRuntime
from sandbox.actions.state.records import Job, RequestRecord, Runner, ScaleSet, Session
from sandbox.actions.state.service import ServiceState

__all__ = [
    "ENDPOINTS",
    "EXIT_OUTDATED",
    "JIT_CONFIG_ENV",
    "ActionsEmulator",
    "AppCredentials",
    "Fault",
    "Faults",
    "Job",
    "RequestRecord",
    "Runner",
    "RunnerRuntime",
    "ScaleSet",
    "ServiceState",
    "Session",
]
