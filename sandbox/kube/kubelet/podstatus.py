"""The pieces of a pod's status the kubelet writes: conditions and container states."""

from __future__ import annotations

from typing import Any

from sandbox.kube.kubelet.process import PROJECT_IMAGE, image_repository

Obj = dict[str, Any]

IMAGE_UIDS = {PROJECT_IMAGE: 10001}
"""The numeric USER of the images the emulator knows (the project's Dockerfile: `USER
10001:10001`). Of an image's `uid:gid` the kubelet passes the uid alone to the runtime."""


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


def container_user(pod: Obj, container: Obj) -> Obj | None:
    """The identity the container's process runs with, as kubelet 1.33+ reports it in the
    container status (`user.linux`; KEP-3619): the container's, else the pod's `runAsUser`,
    else the image's uid; the `runAsGroup` likewise, else group 0, since the kubelet passes the
    image's uid without its group and the runtime then finds no group for it. None when the
    uid is not known (an image the emulator knows nothing of, no `runAsUser`)."""
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    sc = container.get("securityContext") or {}
    uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
    if uid is None:
        uid = IMAGE_UIDS.get(image_repository(str(container.get("image", ""))))
    if uid is None:
        return None
    gid = sc.get("runAsGroup", pod_sc.get("runAsGroup"))
    gid = 0 if gid is None else gid
    extra = [*(pod_sc.get("supplementalGroups") or []), pod_sc.get("fsGroup")]
    groups = [gid, *sorted({g for g in extra if g is not None} - {gid})]
    return {"linux": {"uid": uid, "gid": gid, "supplementalGroups": groups}}
