# nsscaler: one short-lived run per container start. Build: make image
FROM python:3.12.8-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY job/ job/
# Build a wheel, then install only it (and its dependencies) into a venv that the final stage copies.
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/nsscaler \
 && /opt/nsscaler/bin/pip install --no-cache-dir /wheels/*.whl

FROM python:3.12.8-slim-bookworm
LABEL org.opencontainers.image.title="nsscaler" \
      org.opencontainers.image.description="Holds namespace families at zero replicas, except the active ones, and restores them exactly."
ENV PATH=/opt/nsscaler/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/nsscaler /opt/nsscaler
# A numeric user, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
ENTRYPOINT ["nsscaler"]
