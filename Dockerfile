# One image for both processes: the listener by default, the controller with
# `command: [gha-controller]` (or `docker run IMAGE gha-controller`).

# Builder: a virtual environment with the project and its dependencies. Every dependency ships
# manylinux wheels for Python 3.11, so no compiler is needed here either.
FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
# listener, controller and shared only: the sandbox (the emulators) is the separate gha-sandbox
# distribution (sandbox/pyproject.toml) and stays out of the image.
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY listener ./listener
COPY controller ./controller
RUN /opt/venv/bin/pip install --no-cache-dir .

# Runtime: the slim base and the virtual environment, nothing else (no pip cache, no sources).
FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=builder /opt/venv /opt/venv
# A numeric user, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
# Listener metrics and probes (metrics_addr), controller metrics; the controller's probes
# listen on 8081.
EXPOSE 8080 8081
CMD ["gha-listener"]
