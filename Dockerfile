# nsscaler: one short-lived run per container start. Build: make image
# Every package comes from a lock with hashes (requirements*.lock, `make lock`): no resolver runs here, so the same
# commit gives the same packages. The SBOM of what the image holds: /usr/share/nsscaler/sbom.cdx.json (CycloneDX).
FROM python:3.12.8-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The build backend, in a venv of its own that the final stage never sees.
COPY requirements-build.lock requirements.lock ./
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements-build.lock
COPY pyproject.toml README.md ./
COPY job/ job/
COPY tools/sbom.py tools/
# The runtime venv holds the locked packages and nsscaler's wheel, nothing else (not even pip: the build venv's pip
# installs into it); then the SBOM of exactly that venv, written by its own interpreter.
# Its bytecode is compiled again, checked by nothing but its presence: pip's is checked against each source's mtime,
# which the image's layer stores rounded to the second, so about half of it (pydantic's, urllib3's) no longer matched
# and every run compiled those modules from source (PYTHONDONTWRITEBYTECODE keeps nothing); the image never changes.
# `-f`: compileall leaves alone bytecode whose timestamp matches when it runs, which here is all of pip's.
RUN /opt/build/bin/pip wheel --no-cache-dir --no-build-isolation --no-deps --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/nsscaler \
 && /opt/build/bin/pip --python /opt/nsscaler/bin/python install --no-cache-dir --require-hashes --no-deps \
    -r requirements.lock \
 && /opt/build/bin/pip --python /opt/nsscaler/bin/python install --no-cache-dir --no-deps /wheels/*.whl \
 && /opt/nsscaler/bin/python -m compileall -f -q --invalidation-mode unchecked-hash /opt/nsscaler/lib \
 && /opt/nsscaler/bin/python tools/sbom.py --output /sbom.cdx.json

FROM python:3.12.8-slim-bookworm
LABEL org.opencontainers.image.title="nsscaler" \
      org.opencontainers.image.description="Holds namespace families at zero replicas, except the active ones, and restores them exactly."
ENV PATH=/opt/nsscaler/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/nsscaler /opt/nsscaler
COPY --from=build /sbom.cdx.json /usr/share/nsscaler/sbom.cdx.json
# A numeric user, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
ENTRYPOINT ["nsscaler"]
