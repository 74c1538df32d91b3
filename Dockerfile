# nsscaler: one short-lived run per container start. Build: make image
# Every package comes from a lock with hashes (requirements*.lock, `make lock`): no resolver runs here, so the same
# commit gives the same packages. The SBOM of what the image holds: /usr/share/nsscaler/sbom.cdx.json (CycloneDX).
#
# The interpreter is Debian's own python3.11 at one exact package version, on Debian's slim base: the same base and
# the same Python that the node tier builds from Debian's packages here (devtools/cluster/images.py) and that `.venv`
# runs the unit and integration tiers on (`make python` installs the version named below), so the image that is
# tested is the image that ships. A security update is a change of PYTHON_DEBIAN_VERSION, nothing else.
ARG PYTHON_DEBIAN_VERSION=3.11.2-6+deb12u9

FROM debian:bookworm-slim AS python
ARG PYTHON_DEBIAN_VERSION
# Every package of the interpreter at the one version (apt refuses a mismatch rather than mixing patch levels).
# apt's and dpkg's logs and caches, and ldconfig's, go too: they differ from one build to the next (times, ordering)
# and nothing reads them at run time, so the same commit gives the same layers (`make publish` pushes them).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    python3.11=${PYTHON_DEBIAN_VERSION} python3.11-minimal=${PYTHON_DEBIAN_VERSION} \
    libpython3.11-stdlib=${PYTHON_DEBIAN_VERSION} libpython3.11-minimal=${PYTHON_DEBIAN_VERSION} \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log /var/cache/ldconfig/aux-cache

FROM python AS build
ARG PYTHON_DEBIAN_VERSION
# venv's pip (ensurepip) and the certificate authorities pip checks the package index against: build stage only.
# ca-certificates is left to Debian's current one on purpose: an old trust store is the risk, not a new one.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    python3.11-venv=${PYTHON_DEBIAN_VERSION} ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 PIP_CERT=/etc/ssl/certs/ca-certificates.crt
WORKDIR /src
# The build backend, in a venv of its own that the final stage never sees.
COPY requirements-build.lock requirements.lock ./
RUN python3.11 -m venv /opt/build \
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
 && python3.11 -m venv --without-pip /opt/nsscaler \
 && /opt/build/bin/pip --python /opt/nsscaler/bin/python install --no-cache-dir --require-hashes --no-deps \
    -r requirements.lock \
 && /opt/build/bin/pip --python /opt/nsscaler/bin/python install --no-cache-dir --no-deps /wheels/*.whl \
 && /opt/nsscaler/bin/python -m compileall -f -q --invalidation-mode unchecked-hash /opt/nsscaler/lib \
 && /opt/nsscaler/bin/python tools/sbom.py --output /sbom.cdx.json

FROM python
LABEL org.opencontainers.image.title="nsscaler" \
      org.opencontainers.image.description="Holds namespace families at zero replicas, except the active ones, and restores them exactly."
ENV PATH=/opt/nsscaler/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/nsscaler /opt/nsscaler
COPY --from=build /sbom.cdx.json /usr/share/nsscaler/sbom.cdx.json
# A numeric user, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
ENTRYPOINT ["nsscaler"]
