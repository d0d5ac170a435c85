"""The JSON types of the built-in fields the emulator reads (pods, services, workload
templates). A real server fails to decode a body whose field has the wrong JSON type (400
BadRequest, "cannot be handled as a Pod"); checking the types first also means no strategy or
the kubelet simulation ever meets a string where it expects a list."""

from __future__ import annotations

from typing import Any

from sandbox.kube import schema as schemas
from sandbox.kube.status import bad_request

Obj = dict[str, Any]

STRING: Obj = {"type": "string"}
INTEGER: Obj = {"type": "integer"}
BOOLEAN: Obj = {"type": "boolean"}
INT_OR_STRING: Obj = {"x-kubernetes-int-or-string": True}
STRING_MAP: Obj = {"type": "object", "additionalProperties": STRING}
OBJECT: Obj = {"type": "object"}


def obj(**props: Obj) -> Obj:
    return {"type": "object", "properties": props}


def array(items: Obj) -> Obj:
    return {"type": "array", "items": items}


_KEY_REF = obj(name=STRING, key=STRING, optional=BOOLEAN)
_NAME_REF = obj(name=STRING, optional=BOOLEAN)
_CONTAINER = obj(
    name=STRING,
    image=STRING,
    imagePullPolicy=STRING,
    command=array(STRING),
    args=array(STRING),
    workingDir=STRING,
    env=array(
        obj(
            name=STRING,
            value=STRING,
            valueFrom=obj(
                secretKeyRef=_KEY_REF,
                configMapKeyRef=_KEY_REF,
                fieldRef=obj(fieldPath=STRING, apiVersion=STRING),
                resourceFieldRef=obj(resource=STRING, containerName=STRING),
            ),
        )
    ),
    envFrom=array(obj(prefix=STRING, configMapRef=_NAME_REF, secretRef=_NAME_REF)),
    ports=array(obj(name=STRING, containerPort=INTEGER, protocol=STRING, hostPort=INTEGER)),
    resources=obj(limits=OBJECT, requests=OBJECT),
    volumeMounts=array(obj(name=STRING, mountPath=STRING, readOnly=BOOLEAN)),
    terminationMessagePath=STRING,
    terminationMessagePolicy=STRING,
    securityContext=OBJECT,
    restartPolicy=STRING,
)
POD_SPEC = obj(
    containers=array(_CONTAINER),
    initContainers=array(_CONTAINER),
    restartPolicy=STRING,
    terminationGracePeriodSeconds=INTEGER,
    activeDeadlineSeconds=INTEGER,
    dnsPolicy=STRING,
    nodeSelector=STRING_MAP,
    serviceAccountName=STRING,
    serviceAccount=STRING,
    automountServiceAccountToken=BOOLEAN,
    nodeName=STRING,
    hostNetwork=BOOLEAN,
    securityContext=OBJECT,
    schedulerName=STRING,
    tolerations=array(
        obj(
            key=STRING,
            operator=STRING,
            value=STRING,
            effect=STRING,
            tolerationSeconds=INTEGER,
        )
    ),
    volumes=array(obj(name=STRING)),
    priority=INTEGER,
    priorityClassName=STRING,
    enableServiceLinks=BOOLEAN,
    preemptionPolicy=STRING,
    imagePullSecrets=array(obj(name=STRING)),
)
POD = obj(spec=POD_SPEC, status=OBJECT)
SERVICE = obj(
    spec=obj(
        type=STRING,
        clusterIP=STRING,
        clusterIPs=array(STRING),
        externalName=STRING,
        sessionAffinity=STRING,
        ipFamilies=array(STRING),
        ipFamilyPolicy=STRING,
        internalTrafficPolicy=STRING,
        externalTrafficPolicy=STRING,
        selector=STRING_MAP,
        ports=array(
            obj(
                name=STRING,
                port=INTEGER,
                targetPort=INT_OR_STRING,
                protocol=STRING,
                nodePort=INTEGER,
                appProtocol=STRING,
            )
        ),
        allocateLoadBalancerNodePorts=BOOLEAN,
        publishNotReadyAddresses=BOOLEAN,
    ),
    status=OBJECT,
)
TEMPLATED = obj(
    spec=obj(
        replicas=INTEGER,
        selector=OBJECT,
        template=obj(metadata=obj(labels=STRING_MAP, annotations=STRING_MAP), spec=POD_SPEC),
    ),
    status=OBJECT,
)


def check(kind: str, schema: Obj, body: Obj) -> None:
    """Drop null fields (the decoder reads them as absent), then answer 400 BadRequest when a
    field has the wrong JSON type, as the real decoder does."""
    _drop_nulls(body)
    wrong = [c for c in schemas.validate(schema, body) if c.reason == "FieldValueTypeInvalid"]
    if wrong:
        raise bad_request(
            f'{kind} in version "v1" cannot be handled as a {kind}: {wrong[0].detail}'
        )


def _drop_nulls(value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for item in value.values():
            _drop_nulls(item)
    elif isinstance(value, list):
        for item in value:
            _drop_nulls(item)
