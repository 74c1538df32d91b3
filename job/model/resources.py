"""What one unit of a workload asks the scheduler for (its footprint), and the record of it a freeze leaves.

A unit is one replica (Deployment, StatefulSet, ReplicaSet, ReplicationController, a `/scale` kind), or one
running Job (`spec.parallelism` Pods). A CronJob's own footprint is no Pod: what its freeze stops are its
Jobs, each frozen and counted as a Job. Where a kind keeps its Pod template, and how many Pods a unit runs,
its handler says (`job.model.kinds`): nothing here knows a kind.

A Pod's effective request per resource is the scheduler's (k8s.io/component-helpers `PodRequests`):
the sum over its app containers plus its sidecars (init containers with `restartPolicy: Always`), or, when
larger, the largest of its init containers plus the sidecars started before it; plus the Pod overhead
(`spec.overhead`, which the RuntimeClass admission sets from the RuntimeClass's `overhead.podFixed`).
A container's missing request defaults to its limit, as the API server defaults a Pod's. Limits add up the
same way; the overhead adds to a limit only where a limit is set. A Pod with a container that requests
nothing at all is counted apart, as "without requests".

Quantities are whole numbers of nano-units here (exact), written back in Kubernetes notation
(`format_quantity`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from job.errors import shown

_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?")
#: every amount is held as a whole number of nano-units (1 CPU = 10**9, 1 byte = 10**9): the finest a
#: Kubernetes quantity can say, and integer arithmetic is what makes a footprint cheap to compute
NANO = 10**9
_EXP10 = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = [(s, 1024**i) for i, s in reversed(list(enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)))]
_BINARY_SIZE = dict(_BINARY)
_DECIMAL = [(s, 1000**i) for i, s in reversed(list(enumerate(("k", "M", "G", "T", "P", "E"), start=1)))]

#: resource name -> nano-units
Amounts = Mapping[str, int]


class BadQuantity(ValueError):
    """A quantity that is not in Kubernetes notation."""


#: the most digits and the largest power of ten a quantity may have: Kubernetes itself holds at most 2**63 - 1
#: nano-units in a canonical form; beyond that a value is nobody's request, and 10**(10**9) would take minutes to
#: compute (a run must never hang on a number someone typed into an annotation)
_MAX_DIGITS = 40
_MAX_EXP10 = 60


def parse_quantity(text: object) -> int:
    """In nano-units, rounded up: "250m" -> 250_000_000, "1Gi" -> 2**30 * 10**9, "1e3" -> 1000 * 10**9."""
    match = _QUANTITY.fullmatch(str(text).strip())
    if match is None or not (match[2] or match[3]):
        raise BadQuantity(f"{shown(text)} is not a Kubernetes quantity")
    sign, whole, fraction, suffix = match[1], match[2] or "0", match[3] or "", match[4] or ""
    if len(whole) + len(fraction) > _MAX_DIGITS or len(suffix) > 6:
        raise BadQuantity(f"{shown(text)} is out of the range of a Kubernetes quantity")
    digits = int(whole + fraction)
    if suffix in _BINARY_SIZE:
        digits, exp10 = digits * _BINARY_SIZE[suffix], 9 - len(fraction)
    elif suffix in _EXP10:
        exp10 = 9 + _EXP10[suffix] - len(fraction)
    else:  # an exponent: 1e3
        exp10 = 9 + int(suffix[1:]) - len(fraction)
    if abs(exp10) > _MAX_EXP10:
        raise BadQuantity(f"{shown(text)} is out of the range of a Kubernetes quantity")
    value = digits * int(10**exp10) if exp10 >= 0 else -(-digits // int(10**-exp10))
    return -value if sign == "-" else value


def format_quantity(nanos: int) -> str:
    """Kubernetes notation: whole numbers with the largest exact binary suffix ("12Gi", "1088Mi"), else
    decimal ("500M"), else plain ("3"); a fraction in millis, rounded up ("3500m")."""
    if nanos % NANO:
        return f"{-(-nanos // 10**6)}m"
    whole = nanos // NANO
    for suffix, size in (*_BINARY, *_DECIMAL):
        if whole and whole % size == 0:
            return f"{whole // size}{suffix}"
    return str(whole)


def add(a: Amounts, b: Amounts, times: int = 1) -> dict[str, int]:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value * times
    return out


def _larger(a: Amounts, b: Amounts) -> dict[str, int]:
    out = dict(a)
    for name, value in b.items():
        if value > out.get(name, 0):
            out[name] = value
    return out


def _amounts(raw: Mapping[str, Any] | None) -> dict[str, int]:
    return {str(k): parse_quantity(v) for k, v in (raw or {}).items()}


def _container(c: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """A container's requests (a missing one defaulted to its limit) and limits."""
    resources = c.get("resources") or {}
    limits = _amounts(resources.get("limits"))
    return {**limits, **_amounts(resources.get("requests"))}, limits


def _pod_sum(apps_in: list[dict[str, int]], inits_in: list[tuple[dict[str, int], bool]]) -> dict[str, int]:
    """The scheduler's sum for one Pod (of requests, or of limits), without the overhead: `inits_in` are the
    init containers in order, each with whether it is a sidecar."""
    apps: dict[str, int] = {}
    for own in apps_in:
        apps = add(apps, own)
    sidecars: dict[str, int] = {}
    inits: dict[str, int] = {}
    for own, sidecar in inits_in:
        if sidecar:
            apps = add(apps, own)
            sidecars = add(sidecars, own)
            inits = _larger(inits, sidecars)
        else:
            inits = _larger(inits, add(own, sidecars))
    return {k: v for k, v in _larger(apps, inits).items() if v}


@dataclass(frozen=True)
class Footprint:
    """One unit of a workload: its Pods, and their summed effective requests and limits."""

    pods: int = 0
    requests: Amounts = field(default_factory=dict)
    limits: Amounts = field(default_factory=dict)
    #: of `pods`, those with a container that requests nothing (counted as zero)
    unrequested: int = 0

    def with_overhead(self, overhead: Amounts) -> Footprint:
        """Each Pod's overhead added to its requests, and to its limits where a limit is set."""
        per_pod = {k: v for k, v in overhead.items() if k in self.limits}
        return Footprint(self.pods, add(self.requests, overhead, self.pods), add(self.limits, per_pod, self.pods),
                         self.unrequested)

    def record(self) -> str:
        """The compact JSON a freeze leaves in `marks.ANNOTATION_FREED`."""
        body: dict[str, Any] = {"pods": self.pods}
        for key, amounts in (("requests", self.requests), ("limits", self.limits)):
            if amounts:
                body[key] = {k: format_quantity(v) for k, v in sorted(amounts.items())}
        if self.unrequested:
            body["unrequested"] = self.unrequested
        return json.dumps(body, separators=(",", ":"))


def parse_record(text: str | None) -> Footprint | None:
    """A footprint from its record; None when there is none or it is not one (then it is unknown)."""
    if not text:
        return None
    try:  # anyone who may edit the workload may write this annotation: whatever it holds, it is read or unknown
        body = json.loads(text)
        pods, unrequested = body["pods"], body.get("unrequested", 0)
        requests, limits = _amounts(body.get("requests")), _amounts(body.get("limits"))
    except Exception:
        return None
    counts = (pods, unrequested)
    if any(type(n) is not int for n in counts) or pods < 0 or not 0 <= unrequested <= pods:
        return None
    if any(v < 0 for amounts in (requests, limits) for v in amounts.values()):
        return None
    return Footprint(pods, requests, limits, unrequested)


def pod_footprint(spec: Mapping[str, Any], *, pods: int, overhead: Amounts | None = None) -> Footprint:
    """`pods` Pods of this Pod spec, with `overhead` (else the spec's own `overhead`). Each container is
    parsed once."""
    apps = [_container(c) for c in spec.get("containers") or []]
    inits = [(_container(c), c.get("restartPolicy") == "Always") for c in spec.get("initContainers") or []]
    nothing = any(not any(r.values()) for r, _ in [*apps, *(c for c, _ in inits)])
    per_pod = [_pod_sum([c[which] for c in apps], [(c[which], sidecar) for c, sidecar in inits]) for which in (0, 1)]
    one = Footprint(pods, {k: v * pods for k, v in per_pod[0].items() if pods},
                    {k: v * pods for k, v in per_pod[1].items() if pods}, pods if nothing else 0)
    return one.with_overhead(_amounts(spec.get("overhead")) if overhead is None else overhead)


def footprint_of(template: Mapping[str, Any] | None, pods: int) -> tuple[Footprint | None, str | None]:
    """The footprint of one unit of a workload that runs `pods` Pods of `template` (its kind's handler says where
    the template is and how many: `KindHandler.pod_template`), and the RuntimeClass whose overhead it still
    lacks (None: complete). No footprint without a template (a custom kind may keep it elsewhere) or with a
    bad quantity."""
    if template is None:
        return None, None
    runtime_class = template.get("runtimeClassName")
    pending = str(runtime_class) if runtime_class and template.get("overhead") is None and pods else None
    try:
        return pod_footprint(template, pods=pods), pending
    except Exception:
        return None, None


def overheads(runtime_classes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """RuntimeClass name -> its Pod overhead (`overhead.podFixed`; none when it sets none)."""
    out = {}
    for rc in runtime_classes:
        name = (rc.get("metadata") or {}).get("name")
        if name:
            try:
                out[str(name)] = _amounts((rc.get("overhead") or {}).get("podFixed"))
            except BadQuantity:
                continue
    return out
