"""The PodDisruptionBudget strategy (policy/v1): a fresh status on create and the real
validation, with its field paths and words (docs/sandbox-kube.md#poddisruptionbudgets)."""

from __future__ import annotations

import re
from typing import Any

from sandbox.kube.kinds import shapes
from sandbox.kube.status import Cause

Obj = dict[str, Any]

PDBS = ("policy", "poddisruptionbudgets")
POLICIES = ("AlwaysAllow", "IfHealthyBudget")
STATUS_COUNTS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
_PERCENT = re.compile(r"^[0-9]+%$")
PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
    "'93%', regex used for validation is '[0-9]+%')"
)
SHAPE = shapes.obj(
    spec=shapes.obj(
        minAvailable=shapes.INT_OR_STRING,
        maxUnavailable=shapes.INT_OR_STRING,
        selector=shapes.OBJECT,
        unhealthyPodEvictionPolicy=shapes.STRING,
    ),
    status=shapes.obj(
        **dict.fromkeys(STATUS_COUNTS, shapes.INTEGER),
        observedGeneration=shapes.INTEGER,
        disruptedPods=shapes.STRING_MAP,
        conditions=shapes.array(shapes.OBJECT),
    ),
)
# What a real server's decoded empty status serializes to: the counts have no omitempty.
EMPTY_STATUS: Obj = dict.fromkeys(STATUS_COUNTS, 0)


def prepare_create(obj: Obj) -> None:
    shapes.check("PodDisruptionBudget", SHAPE, obj)
    obj["status"] = dict(EMPTY_STATUS)


def prepare_update(new: Obj) -> None:
    shapes.check("PodDisruptionBudget", SHAPE, new)


def _go_int_or_string(value: int | str) -> str:
    """How Go's %#v prints an intstr.IntOrString (the value of these Invalid errors)."""
    if isinstance(value, str):
        return f'intstr.IntOrString{{Type:1, IntVal:0, StrVal:"{value}"}}'
    return f'intstr.IntOrString{{Type:0, IntVal:{value}, StrVal:""}}'


def _int_or_percent(value: Any, field: str) -> list[Cause]:
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [
                Cause(
                    "FieldValueInvalid",
                    field=field,
                    detail=f"{_go_int_or_string(value)}: {PERCENT_MSG}",
                )
            ]
        if int(value[:-1]) > 100:
            return [
                Cause(
                    "FieldValueInvalid",
                    field=field,
                    detail=f"{_go_int_or_string(value)}: must not be greater than 100%",
                )
            ]
        return []
    if isinstance(value, int) and value < 0:
        return [
            Cause(
                "FieldValueInvalid",
                field=field,
                detail=f"{value}: must be greater than or equal to 0",
            )
        ]
    return []


def _selector_causes(selector: Any) -> list[Cause]:
    out: list[Cause] = []
    if not isinstance(selector, dict):
        return out
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        where = f"spec.selector.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            continue
        op, values = expr.get("operator"), expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                out.append(
                    Cause(
                        "FieldValueRequired",
                        field=f"{where}.values",
                        detail="must be specified when `operator` is 'In' or 'NotIn'",
                    )
                )
        elif op in ("Exists", "DoesNotExist"):
            if values:
                out.append(
                    Cause(
                        "FieldValueForbidden",
                        field=f"{where}.values",
                        detail="may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field=f"{where}.operator",
                    detail=f'"{op}": not a valid selector operator',
                )
            )
    return out


def causes(obj: Obj) -> list[Cause]:
    spec: Obj = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    out: list[Cause] = []
    minimum, maximum = spec.get("minAvailable"), spec.get("maxUnavailable")
    if minimum is not None and maximum is not None:
        # Go prints the internal spec struct with %#v: its pointers as addresses.
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec",
                detail="policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)"
                "(0xc000a10000), Selector:(*v1.LabelSelector)(0xc000a10020), "
                "MaxUnavailable:(*intstr.IntOrString)(0xc000a10040), "
                "UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}: "
                "minAvailable and maxUnavailable cannot be both set",
            )
        )
    if minimum is not None:
        out += _int_or_percent(minimum, "spec.minAvailable")
    if maximum is not None:
        out += _int_or_percent(maximum, "spec.maxUnavailable")
    out += _selector_causes(spec.get("selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in POLICIES:
        out.append(
            Cause(
                "FieldValueNotSupported",
                field="spec.unhealthyPodEvictionPolicy",
                detail=f'"{policy}": supported values: "AlwaysAllow", "IfHealthyBudget"',
            )
        )
    status: Obj = obj["status"] if isinstance(obj.get("status"), dict) else {}
    for key in STATUS_COUNTS:
        value = status.get(key)
        if isinstance(value, int) and value < 0:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field=f"status.{key}",
                    detail=f"{value}: must be greater than or equal to 0",
                )
            )
    return out
