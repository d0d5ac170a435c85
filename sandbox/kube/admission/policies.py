"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) as kube-apiserver's admission
plugin applies it (docs/sandbox-kube.md#validatingadmissionpolicy).

On every create, update (PUT and PATCH, main resource or subresource) and delete that a client
sends, each stored policy is tried with each of its bindings: the policy's `matchConstraints` and
the binding's `matchResources` (resource rules with operations, scope and resource names, the
exclusions, namespace and object selectors), then its `matchConditions`, then its
`validations`, all CEL evaluated by cel-python with the real server's variables: `object`,
`oldObject` (null on create, `object` null on delete), `request` (an AdmissionRequest: kind,
resource, subResource, name, namespace, operation, userInfo, dryRun), `namespaceObject`,
`variables` (the policy's, in order) and `params` (always null: no `paramKind`). A binding's
`Deny` refuses the request with the first failed validation, `Warn` adds a warning, `Audit` is
ignored. An evaluation error follows `failurePolicy` (Fail unless Ignore). The refusal has the
real server's shape: `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with
binding '<binding>' denied request: <message>`, 422 `Invalid` unless the validation names
another reason, the same text as the one cause.

Writes by the emulator's own controllers (kubelet, garbage collector, token controller) carry no
request identity and are not admitted, as no shipped policy matches their real identities.
"""

from __future__ import annotations

import contextvars
import functools
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, CELFunction, bool_eq

from sandbox.kube.rbac import User
from sandbox.kube.resources import ResourceType
from sandbox.kube.status import ApiError, qualified
from sandbox.kube.store import Store

Obj = dict[str, Any]

POLICIES = ("admissionregistration.k8s.io", "validatingadmissionpolicies")
BINDINGS = ("admissionregistration.k8s.io", "validatingadmissionpolicybindings")
NAMESPACES = ("", "namespaces")

REQUEST_USER: contextvars.ContextVar[User | None] = contextvars.ContextVar(
    "admission_user", default=None
)
"""Who sends the request being served; set by the HTTP layer, None for the emulator's own
writers."""

MAX_MESSAGE_BYTES = 5 * 1024
"""celconfig.MaxEvaluatedMessageExpressionSizeBytes: a longer messageExpression is not used."""

_CEL_KEYWORDS = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "package",
        "null",
        "return",
        "true",
        "var",
        "void",
        "while",
    ]
)
_ESCAPES = re.compile(r"__|[./-]")
_ESCAPED = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAP_FIELDS = frozenset(
    [
        "labels",
        "annotations",
        "matchLabels",
        "nodeSelector",
        "selector",
        "data",
        "stringData",
        "binaryData",
        "limits",
        "requests",
        "capacity",
        "allocatable",
        "hard",
        "used",
    ]
)
"""Fields whose value is a map in the Kubernetes schemas the emulator serves without one (the
built-in kinds): their keys are not property names."""
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}
_ENV = celpy.Environment()


@dataclass(frozen=True, slots=True)
class Request:
    """What is being admitted (admission.Attributes)."""

    rt: ResourceType
    operation: str
    """CREATE, UPDATE or DELETE (a PATCH is an UPDATE)."""
    namespace: str
    name: str
    obj: Obj | None
    old: Obj | None
    user: User
    subresource: str = ""
    dry_run: bool = False


@dataclass(slots=True)
class Decision:
    message: str
    reason: str = "Invalid"


@dataclass(slots=True)
class Outcome:
    warnings: list[str] = field(default_factory=list)


class _EvalError(Exception):
    """A CEL evaluation failed; the message is safe to show (no values of the object)."""


def _equal(a: Any, b: Any) -> Any:
    """CEL's heterogeneous equality, which cel-python lacks: values of different types are not
    equal (`oldObject != null` on an update is true, not an error), numbers compare by value;
    an error stays an error."""
    for operand in (a, b):
        if isinstance(operand, CELEvalError):
            return operand
    numbers = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return celtypes.BoolType(float(a) == float(b))
    try:
        return celtypes.BoolType(bool(bool_eq(a, b)))
    except TypeError:
        return celtypes.BoolType(False)


def _not_equal(a: Any, b: Any) -> Any:
    equal = _equal(a, b)
    return equal if isinstance(equal, CELEvalError) else celtypes.BoolType(not equal)


_FUNCTIONS: dict[str, CELFunction] = {"_==_": _equal, "_!=_": _not_equal}


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> celpy.Runner:
    return _ENV.program(_ENV.compile(expression), functions=_FUNCTIONS)


def _error_text(exc: BaseException) -> str:
    """The reason of a cel-python error in cel-go's words where they are known. cel-python's own
    text can hold the values evaluated (and the whole activation), so no other text is kept."""
    text = str(exc.args[0]) if exc.args else ""
    if found := re.match(r"no such member in mapping: '([^']*)'", text):
        return f"no such key: {found.group(1)}"
    if found := re.match(r"undeclared reference to '([^']*)'", text):
        return f"undeclared reference to '{found.group(1)}'"
    if "no matching overload" in text or "no such overload" in text:
        return "no such overload"
    if "divide by zero" in text:
        return "division by zero"
    if "does not support field selection" in text:
        return "no such key"
    return "evaluation error"


def _evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    """The expression's value; `_EvalError` with cel-go's message shape if it fails."""
    try:
        program = _program(expression)
    except CELParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise _EvalError(f"compilation error: {first}") from None
    try:
        value = program.evaluate(dict(activation))
    except CELEvalError as exc:
        raise _EvalError(
            f"expression '{expression}' resulted in error: {_error_text(exc)}"
        ) from None
    if isinstance(value, CELEvalError):
        raise _EvalError(f"expression '{expression}' resulted in error: {_error_text(value)}")
    return value


def _is_true(value: Any) -> bool:
    return isinstance(value, celtypes.BoolType) and bool(value)


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; empty or missing selects everything."""
    if not isinstance(selector, dict):
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def _rule_matches(rule: Obj, req: Request) -> bool:
    """One NamedRuleWithOperations: `*` for all resources (not subresources), `*/*` for all
    with their subresources, `pods/*`, `*/status`..."""
    operations = rule.get("operations") or []
    if "*" not in operations and req.operation not in operations:
        return False
    groups = rule.get("apiGroups") or []
    versions = rule.get("apiVersions") or []
    if "*" not in groups and req.rt.group not in groups:
        return False
    if "*" not in versions and req.rt.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if (scope == "Cluster" and req.rt.namespaced) or (
        scope == "Namespaced" and not req.rt.namespaced
    ):
        return False
    names = rule.get("resourceNames") or []
    if names and req.name not in names:
        return False
    for entry in rule.get("resources") or []:
        resource, _, sub = str(entry).partition("/")
        if resource in ("*", req.rt.plural) and sub in ("*", req.subresource):
            return True
    return False


def _labels(obj: Obj | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def _resources_match(match: Obj | None, req: Request, namespace: Obj | None) -> bool:
    """MatchResources: a resource rule and no exclusion, and both selectors."""
    match = match or {}
    if not any(_rule_matches(rule, req) for rule in match.get("resourceRules") or []):
        return False
    if any(_rule_matches(rule, req) for rule in match.get("excludeResourceRules") or []):
        return False
    ns_selector = match.get("namespaceSelector")
    if req.rt.key == NAMESPACES:
        if not _selector_matches(ns_selector, _labels(req.obj or req.old)):
            return False
    elif req.rt.namespaced and not _selector_matches(ns_selector, _labels(namespace)):
        return False
    selector = match.get("objectSelector")
    return _selector_matches(selector, _labels(req.obj)) or _selector_matches(
        selector, _labels(req.old)
    )


def _binding_match(binding: Obj, req: Request, namespace: Obj | None) -> bool:
    """A binding without `matchResources` applies wherever its policy does."""
    match = (binding.get("spec") or {}).get("matchResources")
    if not match:
        return True
    if not match.get("resourceRules"):
        match = {
            **match,
            "resourceRules": [
                {
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "resources": ["*/*"],
                    "operations": ["*"],
                }
            ],
        }
    return _resources_match(match, req, namespace)


def _escape(name: str) -> str | None:
    """A property name as CEL sees it (apiserver's cel.Escape): a CEL keyword `x` becomes
    `__x__`, and `__`, `.`, `-` and `/` become `__underscores__`, `__dot__`, `__dash__`,
    `__slash__`; a name that cannot be escaped is not accessible (None). `namespace` is not
    escaped: a 1.32 server answers `object.metadata.namespace` and refuses `__namespace__`."""
    if not name or name[0].isdigit():
        return None
    if name in _CEL_KEYWORDS:
        return f"__{name}__"
    escaped = _ESCAPES.sub(lambda found: _ESCAPED[found.group(0)], name)
    return escaped if _IDENT.fullmatch(escaped) else None


def _escaped(value: Any, *, keys_are_names: bool = True) -> Any:
    """The JSON with its object property names escaped; the keys of map fields (labels,
    annotations, data, resource lists...) are map keys, which CEL reaches by index, unescaped."""
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if not isinstance(value, dict):
        return value
    if not keys_are_names:
        return dict(value)
    out: Obj = {}
    for key, item in value.items():
        name = _escape(str(key))
        if name is not None:
            out[name] = _escaped(item, keys_are_names=key not in _MAP_FIELDS)
    return out


def _as_cel(value: Obj | None) -> Any:
    return None if value is None else json_to_cel(_escaped(value))


def _request(req: Request) -> Obj:
    """The AdmissionRequest the `request` variable holds."""
    kind = {"group": req.rt.group, "version": req.rt.version, "kind": req.rt.kind}
    resource = {"group": req.rt.group, "version": req.rt.version, "resource": req.rt.plural}
    out: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": req.name,
        "namespace": req.namespace,
        "operation": req.operation,
        "userInfo": req.user.info(),
        "dryRun": req.dry_run,
    }
    if req.subresource:
        out["subResource"] = out["requestSubResource"] = req.subresource
    return out


def _activation(req: Request, namespace: Obj | None, policy: Obj) -> dict[str, Any]:
    def with_type(obj: Obj | None) -> Obj | None:
        if obj is None:
            return None
        return {**obj, "apiVersion": req.rt.api_version, "kind": req.rt.kind}

    activation: dict[str, Any] = {
        "object": _as_cel(with_type(req.obj)),
        "oldObject": _as_cel(with_type(req.old)),
        "request": _as_cel(_request(req)),
        "namespaceObject": _as_cel(namespace),
        "params": None,
    }
    variables: dict[str, Any] = {}
    for variable in (policy.get("spec") or {}).get("variables") or []:
        activation["variables"] = celtypes.MapType(
            {celtypes.StringType(k): v for k, v in variables.items()}
        )
        try:
            variables[str(variable["name"])] = _evaluate(str(variable["expression"]), activation)
        except _EvalError as exc:
            # Lazy on the real server: an error counts only where the variable is used.
            variables[str(variable["name"])] = CELEvalError(str(exc))
    activation["variables"] = celtypes.MapType(
        {celtypes.StringType(k): v for k, v in variables.items()}
    )
    return activation


def _conditions_match(policy: Obj, activation: Mapping[str, Any]) -> bool:
    """matchConditions: any false skips the policy; otherwise an error fails it
    (`_EvalError`, which the failure policy then decides)."""
    errors: list[str] = []
    for condition in (policy.get("spec") or {}).get("matchConditions") or []:
        try:
            value = _evaluate(str(condition.get("expression", "")), activation)
        except _EvalError as exc:
            errors.append(str(exc))
            continue
        if not _is_true(value):
            return False
    if errors:
        raise _EvalError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return True


def _message(validation: Obj, activation: Mapping[str, Any]) -> str:
    """messageExpression if it gives one line of at most 5 KiB, else message, else the
    expression."""
    if validation.get("messageExpression"):
        try:
            value = _evaluate(str(validation["messageExpression"]), activation)
        except _EvalError:
            value = None
        if isinstance(value, str):
            text = str(value).strip()
            if text and len(text.encode()) <= MAX_MESSAGE_BYTES and "\n" not in text:
                return text
    if str(validation.get("message") or "").strip():
        return str(validation["message"]).strip()
    return f"failed expression: {str(validation.get('expression', '')).strip()}"


def _decisions(policy: Obj, activation: Mapping[str, Any]) -> Iterator[Decision]:
    """The failed validations of a matching policy, in order."""
    fail = (policy.get("spec") or {}).get("failurePolicy", "Fail") != "Ignore"
    try:
        if not _conditions_match(policy, activation):
            return
    except _EvalError as exc:
        if fail:
            yield Decision(str(exc))
        return
    for validation in (policy.get("spec") or {}).get("validations") or []:
        try:
            value = _evaluate(str(validation.get("expression", "")), activation)
        except _EvalError as exc:
            if fail:
                yield Decision(str(exc))
            continue
        if not _is_true(value):
            yield Decision(_message(validation, activation), validation.get("reason") or "Invalid")


def admit(store: Store, req: Request) -> Outcome:
    """Apply every policy that matches `req`: raise the first `Deny`, return the warnings."""
    outcome = Outcome()
    policies = list(store.items(POLICIES))
    if not policies:
        return outcome
    bindings = list(store.items(BINDINGS))
    namespace = store.get(NAMESPACES, "", req.namespace) if req.namespace else None
    for policy in policies:
        name = policy["metadata"]["name"]
        spec = policy.get("spec") or {}
        if not _resources_match(spec.get("matchConstraints"), req, namespace):
            continue
        activation: dict[str, Any] | None = None
        for binding in bindings:
            binding_spec = binding.get("spec") or {}
            if binding_spec.get("policyName") != name:
                continue
            if not _binding_match(binding, req, namespace):
                continue
            if activation is None:
                activation = _activation(req, namespace, policy)
            actions = binding_spec.get("validationActions") or []
            for decision in _decisions(policy, activation):
                binding_name = binding["metadata"]["name"]
                if "Warn" in actions:
                    outcome.warnings.append(
                        f"Validation failed for ValidatingAdmissionPolicy '{name}' with binding "
                        f"'{binding_name}': {decision.message}"
                    )
                if "Deny" in actions:
                    raise _denied(req, name, binding_name, decision)
    return outcome


def _denied(req: Request, policy: str, binding: str, decision: Decision) -> ApiError:
    """admission.NewForbidden with the policy's reason and code (the dispatcher's)."""
    cause = f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: " + (
        decision.message
    )
    resource = qualified(req.rt.plural, req.rt.group)
    subject = f'{resource} "{req.name}"' if req.name else resource
    details: Obj = {"name": req.name} if req.name else {}
    if req.rt.group:
        details["group"] = req.rt.group
    details["kind"] = req.rt.plural
    details["causes"] = [{"message": cause}]
    return ApiError(
        _CODES.get(decision.reason, 422),
        decision.reason,
        message=f"{subject} is forbidden: {cause}",
        details=details,
    )
