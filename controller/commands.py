"""What the controller's one-shot commands (`explain`, `migrate-from-arc`) share: a Kubernetes
client with the user's identity, or one line saying what to fix."""

from __future__ import annotations

import sys

from kubernetes_asyncio import client

from shared.kube.client import load_configuration, new_api_client, user_agent


async def user_api(
    prog: str, kubeconfig: str | None, context: str | None
) -> client.ApiClient | None:
    """The user's client (KUBECONFIG, `--kubeconfig`, `--context`); None, after printing why,
    when the configuration cannot be loaded (the command then exits 2)."""
    try:
        kube_config = await load_configuration(kubeconfig, context=context)
    except Exception as exc:
        print(
            f"{prog}: cannot load the Kubernetes configuration ({type(exc).__name__}): "
            "set --kubeconfig or KUBECONFIG",
            file=sys.stderr,
        )
        return None
    return new_api_client(kube_config, user_agent=user_agent("gha-controller"))
