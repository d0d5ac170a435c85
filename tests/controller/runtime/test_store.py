"""The store's owner index and namespace counts agree with a brute-force scan after any sequence
of writes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.runtime import Request, Store
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.views import controller_owner_uid
from shared.typedefs import JSONDict


def runner(name: str, owner: str | None, rv: int, namespace: str = "ns") -> JSONDict:
    meta: JSONDict = {"name": name, "namespace": namespace, "resourceVersion": str(rv)}
    if owner is not None:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "name": owner}]
    return {"metadata": meta}


writes = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "remove"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from([None, "u1", "u2"]),
    ),
    max_size=30,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes)
def test_owned_by_matches_a_scan(ops: list[tuple[str, str, str | None]]) -> None:
    store = Store(EPHEMERAL_RUNNER)
    for rv, (op, name, owner) in enumerate(ops):
        if op == "upsert":
            store.upsert(runner(name, owner, rv))
        else:
            store.remove(Request("ns", name))
    for uid in ("u1", "u2"):
        indexed = [o["metadata"]["name"] for o in store.owned_by(uid)]
        scanned = {o["metadata"]["name"] for o in store if controller_owner_uid(o) == uid}
        assert sorted(indexed) == sorted(scanned)
        assert len(indexed) == len(scanned)


namespaced_writes = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "remove"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["ns1", "ns2"]),
    ),
    max_size=30,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(namespaced_writes)
def test_count_in_matches_a_scan(ops: list[tuple[str, str, str]]) -> None:
    store = Store(EPHEMERAL_RUNNER)
    for rv, (op, name, namespace) in enumerate(ops):
        if op == "upsert":
            store.upsert(runner(name, None, rv, namespace))
        else:
            store.remove(Request(namespace, name))
    for namespace in ("ns1", "ns2", "ns3"):
        assert store.count_in(namespace) == len(store.keys_in(namespace))


def test_owned_by_keeps_first_seen_order_across_updates() -> None:
    store = Store(EPHEMERAL_RUNNER)
    for rv, name in enumerate(["b", "a", "c"]):
        store.upsert(runner(name, "u1", rv))
    store.upsert(runner("b", "u1", 10))
    assert [o["metadata"]["name"] for o in store.owned_by("u1")] == ["b", "a", "c"]
    assert store.owned_by("u1")[0]["metadata"]["resourceVersion"] == "10"
