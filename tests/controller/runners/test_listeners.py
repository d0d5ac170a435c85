"""ARC's listener is recognised by what it runs, not by one repository name
(docs/autoscaling.md#arcs-listener-image)."""

from __future__ import annotations

import pytest

from controller.runners.listeners import is_arc_image, runs_arc_listener
from shared.typedefs import JSONDict

ARC_IMAGE = "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2"


def listener(image: str = "ghcr.io/example/gha-runner-scaler:1", **container: object) -> JSONDict:
    spec: JSONDict = {"image": image}
    if container:
        spec["template"] = {"spec": {"containers": [{"name": "listener", **container}]}}
    return {"spec": spec}


@pytest.mark.parametrize(
    ("image", "arc"),
    [
        ("ghcr.io/actions/gha-runner-scale-set-controller:0.14.2", True),
        ("gha-runner-scale-set-controller", True),
        (
            "registry.example:5000/mirror/ghcr.io/actions/gha-runner-scale-set-controller:0.9.3",
            True,
        ),
        ("artifactory.example/actions-gha-runner-scale-set-controller:0.14.2", True),
        ("ghcr.io/actions/gha-runner-scale-set-controller@sha256:" + "a" * 64, True),
        ("ghcr.io/example/gha-runner-scaler:1", False),
        ("ghcr.io/actions/gha-runner-scale-set-controller-fork/listener:1", False),
        ("ghcr.io/actions/gha-runner-scale-set:0.14.2", False),
    ],
)
def test_arcs_image_by_its_repository_whatever_serves_it(image: str, arc: bool) -> None:
    assert is_arc_image(image) is arc


@pytest.mark.parametrize(
    ("case", "the_listener", "arc"),
    [
        ("our image", listener(), False),
        ("ARC's image as the listener image", listener(ARC_IMAGE), True),
        ("ARC's image in the template", listener(image=ARC_IMAGE, imagePullPolicy="Always"), True),
        (
            "a mirror that renames ARC's image, with ARC's command",
            listener(image="mirror.example/arc/listener:0.14.2", command=["/ghalistener"]),
            True,
        ),
        (
            "a renamed mirror without a command is not recognised",
            listener(image="mirror.example/arc/listener:0.14.2"),
            False,
        ),
        (
            "ARC's image running another command",
            listener(
                image=ARC_IMAGE,
                command=["/usr/local/bin/gha-listener"],
            ),
            False,
        ),
    ],
)
def test_arcs_listener_by_its_command_or_image(
    case: str, the_listener: JSONDict, arc: bool
) -> None:
    assert runs_arc_listener(the_listener) is arc, case
