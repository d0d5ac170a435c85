"""ValidatingAdmissionPolicy in the emulator (docs/sandbox-kube.md#validatingadmissionpolicy): a
table of policies and writes through kubernetes-asyncio, each refused or admitted with the real
server's status (code, reason, message, details)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import GROUP, MERGE, VERSION, WIDGETS, status_of, widget

pytestmark = pytest.mark.usefixtures("widgets")

Obj = dict[str, Any]
ADMISSION = "admissionregistration.k8s.io/v1"
WIDGET_RULE = {
    "apiGroups": [GROUP],
    "apiVersions": ["*"],
    "operations": ["CREATE", "UPDATE", "DELETE"],
    "resources": [WIDGETS],
}


def install(
    kube: KubeEmulator,
    spec: Obj,
    *,
    actions: tuple[str, ...] = ("Deny",),
    binding: Obj | None = None,
) -> None:
    kube.apply(
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "widget-policy"},
            "spec": {"matchConstraints": {"resourceRules": [WIDGET_RULE]}, **spec},
        }
    )
    kube.apply(
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "widget-binding"},
            "spec": {
                "policyName": "widget-policy",
                "validationActions": list(actions),
                **(binding or {}),
            },
        }
    )


@dataclass(frozen=True)
class Case:
    spec: Obj
    """The policy's spec, `matchConstraints` included unless given."""
    denied: str = ""
    """The message after "denied request: ", or empty when admitted."""
    code: int = 422
    reason: str = "Invalid"
    write: str = "create"
    """create a widget of size 1, update it to size 2, patch its status, or delete it."""
    binding: Obj = field(default_factory=dict)
    labels: Obj = field(default_factory=dict)
    extra: Obj = field(default_factory=dict)
    """spec.extra of the widget created (a field that keeps unknown properties)."""


def rule(expression: str, **more: Any) -> Obj:
    return {"validations": [{"expression": expression, **more}]}


CASES = {
    "no message: the expression": Case(
        rule("object.spec.size > 1"), denied="failed expression: object.spec.size > 1"
    ),
    "message": Case(rule("object.spec.size > 1", message="too small"), denied="too small"),
    "messageExpression wins": Case(
        rule(
            "object.spec.size > 1",
            message="too small",
            messageExpression="'size ' + string(object.spec.size) + ' is too small'",
        ),
        denied="size 1 is too small",
    ),
    "a failing messageExpression falls back to message": Case(
        rule("object.spec.size > 1", message="too small", messageExpression="object.spec.nope"),
        denied="too small",
    ),
    "a multi-line messageExpression falls back": Case(
        rule("object.spec.size > 1", messageExpression="'a\\nb'"),
        denied="failed expression: object.spec.size > 1",
    ),
    "reason Forbidden: 403": Case(
        rule("object.spec.size > 1", message="no", reason="Forbidden"),
        denied="no",
        code=403,
        reason="Forbidden",
    ),
    "passes": Case(rule("object.spec.size == 1 && oldObject == null")),
    "values of different types are not equal": Case(
        rule("object != null && object.spec.size != 'one' && object.spec.size == 1.0"),
    ),
    "update: oldObject is not null": Case(
        rule("oldObject != null && oldObject.spec.size == 2", message="no"), write="update"
    ),
    "an error fails the request": Case(
        rule("object.spec.nope == 1"),
        denied="expression 'object.spec.nope == 1' resulted in error: no such key: nope",
    ),
    "an error with failurePolicy Ignore is admitted": Case(
        {**rule("object.spec.nope == 1"), "failurePolicy": "Ignore"}
    ),
    "has() and macros": Case(
        rule("!has(object.spec.tags) && [1, 2, 3].all(i, i > 0) && [1].exists(i, i == 1)")
    ),
    "a false matchCondition skips the policy": Case(
        {**rule("false"), "matchConditions": [{"name": "never", "expression": "false"}]}
    ),
    "a true matchCondition applies it": Case(
        {
            **rule("false", message="applied"),
            "matchConditions": [
                {
                    "name": "admin",
                    "expression": "request.userInfo.username == 'kubernetes-admin' && "
                    "request.operation == 'CREATE' && request.resource.resource == 'widgets'",
                }
            ],
        },
        denied="applied",
    ),
    "a matchCondition error fails it": Case(
        {**rule("true"), "matchConditions": [{"name": "bad", "expression": "object.nope"}]},
        denied="expression 'object.nope' resulted in error: no such key: nope",
    ),
    "variables": Case(
        {
            **rule("variables.big", message="small"),
            "variables": [
                {"name": "size", "expression": "object.spec.size"},
                {"name": "big", "expression": "variables.size > 5"},
            ],
        },
        denied="small",
    ),
    "a variable that fails counts only where it is used": Case(
        {
            **rule("object.spec.size == 1 || variables.bad"),
            "variables": [{"name": "bad", "expression": "object.spec.nope"}],
        }
    ),
    "metadata.namespace, unescaped as on a 1.32 server": Case(
        rule("object.metadata.namespace == namespaceObject.metadata.name", message="x")
    ),
    "a property with a dash is escaped": Case(
        rule("object.spec.extra.a__dash__b == 1 && object.spec.extra.c__dot__d == 2"),
        extra={"a-b": 1, "c.d": 2},
    ),
    "a label selector on the object": Case(
        {**rule("false", message="labelled")},
        binding={"matchResources": {"objectSelector": {"matchLabels": {"team": "a"}}}},
        labels={"team": "a"},
        denied="labelled",
    ),
    "a label selector that does not select": Case(
        {**rule("false")},
        binding={"matchResources": {"objectSelector": {"matchLabels": {"team": "b"}}}},
        labels={"team": "a"},
    ),
    "a namespace selector": Case(
        {**rule("false")},
        binding={"matchResources": {"namespaceSelector": {"matchLabels": {"tier": "prod"}}}},
    ),
    "update: object against oldObject": Case(
        rule("object.spec.size <= oldObject.spec.size", message="grows"),
        write="update",
        denied="grows",
    ),
    "the main resource's rule does not match /status": Case(rule("false"), write="status"),
    "a /status rule does": Case(
        {
            **rule("request.subResource == 'status' && false", message="status"),
            "matchConstraints": {
                "resourceRules": [{**WIDGET_RULE, "resources": [f"{WIDGETS}/status"]}]
            },
        },
        write="status",
        denied="status",
    ),
    "delete: object is null": Case(
        rule("!(object == null && oldObject.spec.size == 2)", message="deleted"),
        write="delete",
        denied="deleted",
    ),
    "resourceNames": Case(
        {
            **rule("false"),
            "matchConstraints": {"resourceRules": [{**WIDGET_RULE, "resourceNames": ["other"]}]},
        }
    ),
    "excludeResourceRules": Case(
        {
            **rule("false"),
            "matchConstraints": {
                "resourceRules": [WIDGET_RULE],
                "excludeResourceRules": [WIDGET_RULE],
            },
        }
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_policy_table(
    case: Case, kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    if case.write != "create":
        body = widget("w1", 2)
        body["metadata"]["labels"] = case.labels
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    install(kube, case.spec, binding=case.binding)
    body = widget("w1", 1, **({"extra": case.extra} if case.extra else {}))
    body["metadata"]["labels"] = case.labels
    calls = {
        "create": lambda: co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body),
        "update": lambda: co.patch_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, "w1", {"spec": {"size": 3}}, _content_type=MERGE
        ),
        "status": lambda: co.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, WIDGETS, "w1", {"status": {"phase": "x"}}, _content_type=MERGE
        ),
        "delete": lambda: co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1"),
    }
    if not case.denied:
        await calls[case.write]()
        return
    with pytest.raises(client.ApiException) as caught:
        await calls[case.write]()
    cause = (
        f"ValidatingAdmissionPolicy 'widget-policy' with binding 'widget-binding' denied "
        f"request: {case.denied}"
    )
    assert caught.value.status == case.code
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{WIDGETS}.{GROUP} "w1" is forbidden: {cause}',
        "reason": case.reason,
        "details": {"name": "w1", "group": GROUP, "kind": WIDGETS, "causes": [{"message": cause}]},
        "code": case.code,
    }
    if case.write == "create":
        with pytest.raises(client.ApiException) as missing:
            await co.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1")
        assert missing.value.status == 404


async def test_dry_run_is_admitted_too(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    install(kube, rule("false", message="no"))
    with pytest.raises(client.ApiException) as caught:
        await co.create_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, widget("w1"), dry_run="All"
        )
    assert caught.value.status == 422


async def test_a_policy_without_binding_does_nothing(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    kube.apply(
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "unbound"},
            "spec": {"matchConstraints": {"resourceRules": [WIDGET_RULE]}, **rule("false")},
        }
    )
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))


async def test_warn_admits_with_a_warning(kube: KubeEmulator, ns: str) -> None:
    install(kube, rule("false", message="careful"), actions=("Warn",))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{kube.url}/apis/{GROUP}/{VERSION}/namespaces/{ns}/{WIDGETS}",
            json=widget("w1"),
            headers={"Authorization": f"Bearer {kube.admin_token}"},
        ) as response,
    ):
        assert response.status == 201
        assert response.headers.getall("Warning") == [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'widget-policy' with "
            "binding 'widget-binding': careful\""
        ]


async def test_the_emulators_own_writers_are_not_admitted(kube: KubeEmulator, ns: str) -> None:
    """Test setup (`kube.apply`) writes as the emulator's controllers do: no request identity."""
    install(kube, rule("false"))
    kube.apply({**widget("w1"), "metadata": {"name": "w1", "namespace": ns}})
