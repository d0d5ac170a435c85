"""What the AutoscalingRunnerSet reconciler builds, compared with ARC's builder."""

from __future__ import annotations

import pytest

from controller.autoscalingrunnerset.objects import listener_labels, runner_set_labels
from shared.typedefs import JSONDict

VERSION = "app.kubernetes.io/version"


def ars(labels: dict[str, str]) -> JSONDict:
    return {
        "metadata": {"name": "arc", "namespace": "ns", "labels": labels},
        "spec": {"githubConfigUrl": "https://github.com/org"},
    }


@pytest.mark.parametrize(("labels", "version"), [({}, ""), ({VERSION: "0.14.2"}, "0.14.2")])
def test_the_version_label_is_always_written_as_arc_writes_it(
    labels: dict[str, str], version: str
) -> None:
    """ARC's builder writes `app.kubernetes.io/version` from the set's, `""` when it has none;
    a selector or dashboard keyed on the label finds this controller's objects as ARC's."""
    assert runner_set_labels(ars(labels), excluded_prefixes=())[VERSION] == version
    assert listener_labels(ars(labels), excluded_prefixes=())[VERSION] == version
