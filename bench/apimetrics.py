"""What the API server itself counted: requests by verb and response bytes, read from its own /metrics as
admin just before and after a measured run, so every tool (nsscaler, the peer, naive, limit) is counted the
same way, whatever it reports about itself.

Two counters are used: `apiserver_request_total` (every request, by verb) and `apiserver_response_sizes_sum`
(bytes of responses; the API server observes it for read requests only, GET and LIST, which is what a client
receives in bulk: a write's response is one object).

A request to an API the server does not serve (e.g. nsscaler's LIST of KEDA ScaledObjects on a cluster
without KEDA) is answered 404 by a handler that counts nothing, so the server's count of a run can be lower
than the tool's own.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

from devtools.cluster.controlplane import ControlPlane

_REQUESTS = "apiserver_request_total"
_BYTES = "apiserver_response_sizes_sum"
_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')

#: Requests between the two scrapes that no measured tool makes, so they are not counted:
#: - non-resource requests (no `resource` label): the scrape of /metrics itself, /readyz, and the controller
#:   manager's periodic discovery (GET /api, /apis) for its garbage collector;
#: - WATCH: the controller manager's watches end and restart at random times; no measured tool watches;
#: - the API server's own housekeeping, driven by timers: its identity lease (`leases`), the priority-and-
#:   fairness configuration (`flowschemas`, `prioritylevelconfigurations`) and the Service IP repair loops
#:   (`services`, `servicecidrs`, `ipaddresses`, `endpoints`, `endpointslices`).
BACKGROUND_RESOURCES = frozenset({
    "leases", "flowschemas", "prioritylevelconfigurations", "services", "servicecidrs", "ipaddresses",
    "endpoints", "endpointslices",
})
#: The API server's verbs in the words the tools' own reports use.
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "APPLY": "apply", "LIST": "list", "GET": "get",
         "DELETE": "delete", "DELETECOLLECTION": "deletecollection"}


@dataclass(frozen=True)
class Snapshot:
    """The two counters at one instant, keyed (verb, resource) for the requests kept."""

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    response_bytes: Counter[tuple[str, str]] = field(default_factory=Counter)


def parse(text: str) -> Snapshot:
    """The kept samples of one /metrics page (Prometheus text format)."""
    snap = Snapshot()
    for line in text.splitlines():
        if not line.startswith((_REQUESTS, _BYTES)):
            continue
        sample = _SAMPLE.match(line)
        if not sample:
            continue
        labels = dict(_LABEL.findall(sample["labels"]))
        verb, resource = labels.get("verb", ""), labels.get("resource", "")
        if not resource or verb == "WATCH" or resource in BACKGROUND_RESOURCES:
            continue
        key = (VERBS.get(verb, verb.lower()), resource)
        target = snap.requests if sample["name"] == _REQUESTS else snap.response_bytes
        target[key] += int(float(sample["value"]))
    return snap


def scrape(plane: ControlPlane) -> Snapshot:
    resp = plane.session().get(f"{plane.server}/metrics", timeout=60)
    resp.raise_for_status()
    return parse(resp.text)


def delta(before: Snapshot, after: Snapshot) -> dict[str, object]:
    """What happened between two snapshots: requests by verb, bytes by verb/resource, and the totals."""
    requests: Counter[str] = Counter()
    sent = after.requests - before.requests
    for (verb, _), count in sent.items():
        requests[verb] += count
    bytes_by_resource = {f"{verb}/{resource}": n for (verb, resource), n in
                         sorted((after.response_bytes - before.response_bytes).items())}
    return {"server_requests": dict(sorted(requests.items())), "server_total_requests": sum(requests.values()),
            "server_requests_by_resource": {f"{verb}/{resource}": n for (verb, resource), n in sorted(sent.items())},
            "server_bytes": bytes_by_resource, "server_total_bytes": sum(bytes_by_resource.values())}


def wait_quiet(plane: ControlPlane, *, interval: float = 1.0, timeout: float = 600.0) -> None:
    """Wait until the controller manager has caught up with a burst of new namespaces (a ServiceAccount and
    a CA ConfigMap each): two scrapes `interval` apart that count the same requests. Without this, the
    first measured run would pay for the controllers' backlog in server CPU."""
    deadline = time.monotonic() + timeout
    previous = scrape(plane).requests
    while time.monotonic() < deadline:
        time.sleep(interval)
        current = scrape(plane).requests
        if current == previous:
            return
        previous = current
