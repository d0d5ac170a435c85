"""The pieces of a pod's status the kubelet writes: conditions and container states."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def set_condition(
    status: Obj,
    ctype: str,
    *,
    value: str,
    now: str,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    conditions: list[Obj] = status.setdefault("conditions", [])
    cond: Obj = {"type": ctype, "status": value, "lastProbeTime": None}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    for existing in conditions:
        if existing["type"] == ctype:
            unchanged = existing.get("status") == value and existing.get("lastTransitionTime")
            cond["lastTransitionTime"] = existing["lastTransitionTime"] if unchanged else now
            existing.clear()
            existing.update(cond)
            return
    cond["lastTransitionTime"] = now
    conditions.append(cond)


def not_ready_message(pod: Obj) -> str:
    names = " ".join(c["name"] for c in pod["spec"].get("containers") or [])
    return f"containers with unready status: [{names}]"


def waiting_status(container: Obj, reason: str) -> Obj:
    return {
        "name": container["name"],
        "state": {"waiting": {"reason": reason}},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": container.get("image", ""),
        "imageID": "",
        "started": False,
    }


def container_id(uid: str, name: str) -> str:
    return f"sandbox://{uid[:8]}-{name}"


def image_id(cs: Obj) -> str:
    return f"{cs.get('image', '')}@sha256:{'0' * 64}"


def terminated_state(code: int, *, started: str | None, finished: str, container_id: str) -> Obj:
    out: Obj = {
        "exitCode": code,
        "reason": "Completed" if code == 0 else "Error",
        "finishedAt": finished,
        "containerID": container_id,
    }
    if started:
        out["startedAt"] = started
    return out


def mark_exited(status: Obj, pod: Obj, *, name: str, state: Obj, restart: bool, at: str) -> None:
    for cs in status.get("containerStatuses") or []:
        if cs["name"] == name:
            if restart:
                cs["lastState"] = {"terminated": state}
                reason = "CrashLoopBackOff" if state["exitCode"] else "Completed"
                cs["state"] = {"waiting": {"reason": reason}}
            else:
                cs["state"] = {"terminated": state}
            cs["ready"] = False
            cs["started"] = False
    message = f"containers with unready status: [{name}]"
    set_condition(
        status, "Ready", value="False", now=at, reason="ContainersNotReady", message=message
    )
    set_condition(
        status,
        "ContainersReady",
        value="False",
        now=at,
        reason="ContainersNotReady",
        message=message,
    )


def mark_restarted(
    status: Obj, pod: Obj, *, name: str, at: str, count: int, ready: bool = True
) -> None:
    """A restarted container runs again; `ready` is False while a readiness probe decides."""
    for cs in status.get("containerStatuses") or []:
        if cs["name"] == name:
            cs.update(
                state={"running": {"startedAt": at}}, ready=ready, started=True, restartCount=count
            )
    if all(cs.get("ready") for cs in status.get("containerStatuses") or []):
        set_condition(status, "Ready", value="True", now=at)
        set_condition(status, "ContainersReady", value="True", now=at)


def mark_ready(status: Obj, pod: Obj, *, name: str, ready: bool, at: str) -> None:
    """A readiness probe's verdict on a running container, and the pod conditions it implies."""
    for cs in status.get("containerStatuses") or []:
        if cs["name"] == name and "running" in (cs.get("state") or {}):
            cs["ready"] = ready
    statuses = status.get("containerStatuses") or []
    unready = [cs["name"] for cs in statuses if not cs.get("ready")]
    for ctype in ("Ready", "ContainersReady"):
        if unready:
            set_condition(
                status,
                ctype,
                value="False",
                now=at,
                reason="ContainersNotReady",
                message=f"containers with unready status: [{' '.join(unready)}]",
            )
        else:
            set_condition(status, ctype, value="True", now=at)


def mark_config_error(status: Obj, pod: Obj, *, name: str, message: str) -> None:
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") == name:
            cs["state"] = {"waiting": {"reason": "CreateContainerConfigError", "message": message}}
