"""Arbitrary Pod and Service bodies, sent through kubernetes-asyncio over HTTP, are accepted or
refused with a 400/422 Status, never a 500; and no pod the API accepted crashes the kubelet
simulation (docs/sandbox-kube.md#pods)."""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
from collections.abc import Callable, Coroutine
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import wait_for

Obj = dict[str, Any]
NS = "fuzz"

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 70000) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)


def fields(
    required: dict[str, st.SearchStrategy[Any]] | None = None, **optional: st.SearchStrategy[Any]
) -> st.SearchStrategy[Obj]:
    return st.fixed_dictionaries(required or {}, optional=optional)


def rarely(body: st.SearchStrategy[Obj], **extra: st.SearchStrategy[Any]) -> st.SearchStrategy[Obj]:
    """`body`, with the `extra` fields added one time in ten."""
    return st.one_of(
        *[body] * 9, st.builds(lambda b, e: {**b, **e}, body, st.fixed_dictionaries(extra))
    )


def mostly(valid: list[Any], invalid: list[Any]) -> st.SearchStrategy[Any]:
    """A valid value four times in five."""
    return st.sampled_from(valid * 4 * len(invalid) + invalid * len(valid))


def spoil(body: Obj, value: Any, index: int) -> Obj:
    """`body` with one of its fields (any depth) replaced by `value`."""
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for key, child in items:
            slots.append((node, key))
            walk(child)

    walk(body)
    if slots:
        parent, key = slots[index % len(slots)]
        parent[key] = value
    return body


def sometimes_spoiled(typed: st.SearchStrategy[Obj]) -> st.SearchStrategy[Obj]:
    """Well-typed bodies, and now and then one with a field of any JSON type."""
    return typed | st.builds(spoil, typed, junk, st.integers(0, 100))


key_ref = fields(
    name=mostly(["s", "missing"], [""]),
    key=mostly(["k", "absent"], [""]),
    optional=st.booleans(),
)
value_from = st.one_of(
    st.fixed_dictionaries({"secretKeyRef": key_ref}),
    st.fixed_dictionaries({"configMapKeyRef": key_ref}),
    st.fixed_dictionaries(
        {"fieldRef": fields(fieldPath=mostly(["metadata.name", "status.podIP"], ["bogus", ""]))}
    ),
    st.fixed_dictionaries({"resourceFieldRef": fields(resource=mostly(["limits.cpu"], [""]))}),
    fields(secretKeyRef=key_ref, configMapKeyRef=key_ref),
)
env_var = st.one_of(
    fields({"name": mostly(["A", "B_1", "a.b"], ["1x", ""]), "value": st.text(max_size=4)}),
    fields({"name": mostly(["A", "B_1", "a.b"], ["1x", ""]), "valueFrom": value_from}),
    fields(name=st.just("C"), value=st.text(max_size=2), valueFrom=value_from),
)
name_ref = fields(name=mostly(["s", "missing"], [""]), optional=st.booleans())
env_from = st.one_of(
    fields({"configMapRef": name_ref}, prefix=st.text(max_size=2)),
    fields({"secretRef": name_ref}, prefix=st.text(max_size=2)),
    fields(prefix=st.text(max_size=2), configMapRef=name_ref, secretRef=name_ref),
)
container = fields(
    {
        "name": mostly(["a", "b", "main"], ["A", "", "x" * 64]),
        "image": mostly(["busybox", "busybox:1", "r.io/x:latest"], [""]),
    },
    imagePullPolicy=mostly(["Always", "IfNotPresent", "Never"], ["Sometimes"]),
    command=st.lists(st.text(max_size=3), max_size=2),
    env=st.lists(env_var, max_size=3),
    envFrom=st.lists(env_from, max_size=2),
    ports=st.lists(
        fields(
            containerPort=st.integers(1, 65535) | st.integers(-1, 70000),
            protocol=mostly(["TCP", "UDP"], ["ICMP"]),
            name=st.sampled_from(["http", ""]),
        ),
        max_size=2,
    ),
    resources=fields(limits=st.just({"cpu": "1"}), requests=st.just({"memory": "1Mi"})),
)
pod_spec = fields(
    {"containers": st.lists(container, min_size=1, max_size=3, unique_by=lambda c: c["name"])},
    initContainers=st.lists(container, max_size=2, unique_by=lambda c: c["name"]),
    restartPolicy=mostly(["Always", "OnFailure", "Never"], ["Sometimes"]),
    terminationGracePeriodSeconds=st.integers(-2, 40),
    dnsPolicy=mostly(["ClusterFirst", "Default"], ["Bogus"]),
    serviceAccountName=st.sampled_from(["default", "other"]),
    tolerations=st.lists(
        fields(
            key=st.text(max_size=3),
            operator=st.sampled_from(["Exists", "Equal"]),
            effect=st.sampled_from(["NoExecute", ""]),
        ),
        max_size=2,
    ),
    volumes=st.lists(fields(name=st.text(max_size=3), emptyDir=st.just({})), max_size=2),
)
service_port = rarely(
    fields(
        {
            "name": mostly(["http", "https", "grpc"], ["", "Bad_Name"]),
            "port": st.integers(1, 65535) | st.integers(-1, 70000),
        },
        targetPort=st.integers(1, 65535) | st.integers(-1, 70000) | st.sampled_from(["web", ""]),
        protocol=mostly(["TCP", "UDP", "SCTP"], ["ICMP"]),
    ),
    nodePort=st.integers(29999, 32768),
)
service_spec = rarely(
    fields(
        {"ports": st.lists(service_port, min_size=1, max_size=3, unique_by=lambda p: p["name"])},
        type=mostly(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"], ["Fancy"]),
        selector=st.dictionaries(
            st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"]), max_size=2
        ),
        sessionAffinity=mostly(["None", "ClientIP"], ["Sticky"]),
        externalName=mostly(["example.com"], [""]),
        ipFamilyPolicy=mostly(["SingleStack", "PreferDualStack"], ["RequireDualStack", "Odd"]),
        ipFamilies=st.lists(mostly(["IPv4"], ["IPv6", "IPv5"]), max_size=1),
        internalTrafficPolicy=mostly(["Cluster", "Local"], ["Elsewhere"]),
    ),
    clusterIP=st.sampled_from(["None", "", "10.96.0.1", "10.96.7.7", "10.100.0.1", "1.2.3.4", "x"]),
)


def run_fuzz(
    check: Callable[[KubeEmulator, client.CoreV1Api, Obj], Coroutine[Any, Any, None]],
    bodies: st.SearchStrategy[Obj],
) -> None:
    """Drive every generated body through one emulator, on one event loop."""
    loop = asyncio.new_event_loop()
    kube = KubeEmulator()

    async def open_client() -> client.ApiClient:
        await kube.start()
        api = client.ApiClient(await kube.configuration())
        await client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
        return api

    api = loop.run_until_complete(open_client())
    core = client.CoreV1Api(api)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=bodies)
    def example(body: Obj) -> None:
        loop.run_until_complete(check(kube, core, body))

    try:
        example()
    finally:
        loop.run_until_complete(api.close())
        loop.run_until_complete(kube.stop())
        loop.close()


async def create(call: Callable[..., Any], body: Obj) -> tuple[int, Obj]:
    """The answer's code and body; only a 201, a 400 or a 422 may come back."""
    code, answer = 0, {}
    try:
        reply = await call(NS, body, _preload_content=False)
        code, answer = reply.status, await reply.json()
    except client.ApiException as exc:
        code = exc.status
    assert code in (201, 400, 422), answer
    return code, answer


_names = itertools.count()


async def check_pod(kube: KubeEmulator, core: client.CoreV1Api, spec: Obj) -> None:
    name = f"p{next(_names)}"
    code, pod = await create(core.create_namespaced_pod, {"metadata": {"name": name}, "spec": spec})
    if code != 201:
        return
    assert kube.kubelet is not None
    uid = pod["metadata"]["uid"]

    def reported() -> bool:
        status = (kube.store.by_uid(uid) or {}).get("status") or {}
        return "containerStatuses" in status

    def synced() -> bool:
        task = kube.kubelet.workers.get(uid) if kube.kubelet else None
        return bool(task and task.done()) or reported()

    await wait_for(synced)
    # A worker that stopped before reporting its containers crashed (the kubelet logs and
    # swallows a worker's exception, so the status is what shows it).
    assert reported(), kube.store.by_uid(uid)
    await core.delete_namespaced_pod(name, NS, grace_period_seconds=0)
    await wait_for(lambda: kube.store.by_uid(uid) is None)


async def check_service(kube: KubeEmulator, core: client.CoreV1Api, spec: Obj) -> None:
    name = f"s{next(_names)}"
    code, created = await create(
        core.create_namespaced_service, {"metadata": {"name": name}, "spec": spec}
    )
    if code != 201:
        return
    ip = created["spec"].get("clusterIP")
    if ip and ip != "None":
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12")
    every_ip = [
        i
        for s in kube.store.items(("", "services"))
        for i in (s.get("spec") or {}).get("clusterIPs") or []
        if i != "None"
    ]
    assert len(every_ip) == len(set(every_ip))


def test_no_pod_body_gets_a_500_or_crashes_the_kubelet() -> None:
    run_fuzz(check_pod, sometimes_spoiled(pod_spec))


def test_no_service_body_gets_a_500_and_cluster_ips_stay_unique() -> None:
    run_fuzz(check_service, sometimes_spoiled(service_spec))
