"""ARC's `gha-runner-scale-set` chart (0.9 to 0.14.2, `_helpers.tpl`,
`managerServiceAccountName`/`managerServiceAccountNamespace`) looks up its controller's
ServiceAccount among the cluster's Deployments before it renders; without a match `helm install`
and `helm upgrade` fail. The rules, as docs/install.md#keeping-arcs-helm-release records them,
run here over the Deployments `kubectl kustomize manifests/` installs, so that a scale-set release
kept from ARC renders against this controller with no `controllerServiceAccount` values."""

from __future__ import annotations

import copy
from typing import Any

import pytest

PART_OF = "app.kubernetes.io/part-of"
SINGLE = "actions.github.com/controller-watch-single-namespace"
SA_NAME = "actions.github.com/controller-service-account-name"
SA_NAMESPACE = "actions.github.com/controller-service-account-namespace"


class ChartFailed(Exception):
    """The chart's `fail`: `helm install` stops with this message."""


def chart_lookup(
    deployments: list[dict[str, Any]], release_namespace: str, values: dict[str, str]
) -> tuple[str, str]:
    """The manager ServiceAccount's (name, namespace) as the chart resolves them."""
    found = []
    for label, key in ((SA_NAME, "name"), (SA_NAMESPACE, "namespace")):
        if values.get(key):
            found.append(values[key])
            continue
        multi: list[dict[str, Any]] = []
        single: dict[str, dict[str, Any]] = {}
        for deployment in deployments:
            labels = deployment["metadata"].get("labels")
            if not isinstance(labels, dict) or labels.get(PART_OF) != "gha-rs-controller":
                continue
            if SINGLE in labels:
                single[labels[SINGLE]] = deployment
            else:
                multi.append(deployment)
        if not multi and not single:
            raise ChartFailed("No gha-rs-controller deployment found using label")
        if multi and single:
            raise ChartFailed(
                "Found both gha-rs-controller installed with flags.watchSingleNamespace"
            )
        if len(multi) > 1:
            raise ChartFailed("More than one gha-rs-controller deployment found")
        if multi:
            chosen = multi[0]
        elif release_namespace in single:
            chosen = single[release_namespace]
        else:
            raise ChartFailed("No gha-rs-controller deployment that watch this namespace found")
        value = chosen["metadata"]["labels"].get(label, "")
        if not value:
            raise ChartFailed(f"No service account {key} found for gha-rs-controller deployment")
        found.append(value)
    return found[0], found[1]


def deployments(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [copy.deepcopy(o) for o in objects if o["kind"] == "Deployment"]


def test_the_chart_finds_this_controllers_service_account(
    install: list[dict[str, Any]],
) -> None:
    [service_account] = [o for o in install if o["kind"] == "ServiceAccount"]
    assert chart_lookup(deployments(install), "arc-runners", {}) == (
        service_account["metadata"]["name"],
        service_account["metadata"]["namespace"],
    )


def test_without_the_labels_the_chart_fails_unless_values_name_the_account(
    install: list[dict[str, Any]],
) -> None:
    """What the labels buy: the release of a user who kept ARC's chart renders."""
    bare = deployments(install)
    for deployment in bare:
        deployment["metadata"]["labels"] = {"app.kubernetes.io/name": "gha-controller"}
    with pytest.raises(ChartFailed, match="No gha-rs-controller deployment found"):
        chart_lookup(bare, "arc-runners", {})
    values = {"name": "gha-controller", "namespace": "gha-runner-scaler-system"}
    assert chart_lookup(bare, "arc-runners", values) == (
        "gha-controller",
        "gha-runner-scaler-system",
    )


def test_arc_controller_left_in_place_makes_the_lookup_ambiguous(
    install: list[dict[str, Any]],
) -> None:
    """ARC's controller Deployment (scaled to 0, not uninstalled) carries the same part-of
    label: the chart then refuses, and docs/install.md says to set `controllerServiceAccount`
    or uninstall ARC's controller release."""
    arc = {
        "kind": "Deployment",
        "metadata": {
            "name": "arc-gha-rs-controller",
            "namespace": "arc-systems",
            "labels": {
                PART_OF: "gha-rs-controller",
                SA_NAME: "arc-gha-rs-controller",
                SA_NAMESPACE: "arc-systems",
            },
        },
    }
    with pytest.raises(ChartFailed, match="More than one"):
        chart_lookup([*deployments(install), arc], "arc-runners", {})
