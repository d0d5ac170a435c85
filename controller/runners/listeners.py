"""Which listener an AutoscalingListener runs: this project's, or ARC's `/ghalistener`
(docs/autoscaling.md#arcs-listener-image). Both the AutoscalingListener reconciler (ARC's listener
gets ARC's command and no probes) and the EphemeralRunner reconciler (ARC's listener writes a
runner's job without `Running`, so the controller promotes the runner) ask here."""

from __future__ import annotations

import posixpath

from shared.api.names import LISTENER_CONTAINER
from shared.typedefs import JSONDict

ARC_IMAGE_REPOSITORY = "gha-runner-scale-set-controller"
"""The last path element of ARC's controller image, which is also its listener image; a mirror
may prefix it (`actions-gha-runner-scale-set-controller`)."""
ARC_ENTRYPOINT = "/ghalistener"
"""ARC's listener in its image (ARC's default `LISTENER_ENTRYPOINT`)."""


def template_listener(listener: JSONDict) -> JSONDict:
    """The container named `listener` in `spec.template`, {} when there is none."""
    template = (listener.get("spec") or {}).get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        if container.get("name") == LISTENER_CONTAINER:
            return dict(container)
    return {}


def listener_image(listener: JSONDict) -> str:
    """The image the listener container runs: the template's when it sets one."""
    return str(
        template_listener(listener).get("image") or (listener.get("spec") or {}).get("image", "")
    )


def is_arc_image(image: str) -> bool:
    """Whether `image` is ARC's controller image by its repository, whatever registry or path
    serves it: the last path element, without tag or digest, ends with
    `gha-runner-scale-set-controller`."""
    repository = image.partition("@")[0].rsplit("/", 1)[-1].partition(":")[0]
    return repository.endswith(ARC_IMAGE_REPOSITORY)


def runs_arc_listener(listener: JSONDict) -> bool:
    """Whether the listener container runs ARC's listener: the template's `command` runs
    `ghalistener` (whatever the image is called: the way to name a mirror that renames ARC's
    image), or, without a command, the image is ARC's (`is_arc_image`). ARC's listener serves
    neither /healthz nor /readyz and writes a runner's job fields without `Running`."""
    command = template_listener(listener).get("command") or []
    if command:
        return posixpath.basename(str(command[0])) == posixpath.basename(ARC_ENTRYPOINT)
    return is_arc_image(listener_image(listener))
