# One image for both processes: the listener by default, the controller with
# `command: [gha-controller]` (or `docker run IMAGE gha-controller`).
#
# BASE is the Python base of both stages, pinned by digest: two builds of one commit start from
# the same bytes (docs/security.md, "Supply chain", says how to move it). scripts/image-test
# builds this file unchanged on a stand-in for it (Debian bookworm with Debian's python3.11),
# because CI pulls no image.
# checkov:skip=CKV_DOCKER_7:BASE is a build argument whose default is pinned by digest; checkov reads only `FROM ${BASE}`.
# checkov:skip=CKV_DOCKER_2:Kubernetes ignores HEALTHCHECK; the probes are in the manifests, and the two processes serve health on different ports.
ARG BASE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# Builder: a virtual environment with the project and its dependencies. The dependencies and the
# build backend come from the hashed locks only (scripts/lock writes them), as wheels: every
# dependency ships manylinux wheels for Python 3.11, so no compiler, and no unhashed build
# dependency, is needed here either. The project itself is built offline with the locked backend.
FROM ${BASE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# listener, controller and shared only: the sandbox (the emulators) is the separate gha-sandbox
# distribution (sandbox/pyproject.toml) and stays out of the image.
COPY requirements.lock requirements-build.lock pyproject.toml README.md ./
COPY shared ./shared
COPY listener ./listener
COPY controller ./controller
# pip and setuptools only install; the processes never use them, so they leave the venv.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --require-hashes --only-binary :all: \
        -r requirements.lock -r requirements-build.lock \
    && /opt/venv/bin/pip install --no-cache-dir --no-index --no-deps --no-build-isolation . \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/pip uninstall --yes pip setuptools

# Runtime: the base and the virtual environment, nothing else (no pip, no cache, no sources).
FROM ${BASE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=builder /opt/venv /opt/venv
# A numeric user, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
# The listener's default metrics_addr (:8090); the controller's metrics (8080) and probes (8081).
EXPOSE 8090 8080 8081
CMD ["gha-listener"]
