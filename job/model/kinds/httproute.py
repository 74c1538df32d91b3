"""Gateway API HTTPRoutes that follow their namespace's hold: pointed at the waker while it is held, restored
exactly once it is awake. Not a workload (nothing runs, nothing is selected by `spec.kinds`): a route has no
size, only a record, so it is not in the workload registry (`BUILTIN`), and `job.decide.routes` decides when.

Frozen, each rule that has `backendRefs` sends to the waker's Service instead (a cross-namespace reference the
`ReferenceGrant` of `grant` allows), and its `RequestHeaderModifier` sets `HEADER_NAMESPACE` to the route's
namespace: `set` replaces any value the client sent, so a request cannot name another namespace. Every other
filter (authentication, rewrites) stays as it was. A rule without `backendRefs` (a redirect) is untouched.
The record is the whole `spec.rules` before, as JSON, in the same write; the restore writes it back (a merge
patch replaces a list whole), so the route is exactly as it was.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from job.errors import shown
from job.model.kinds.kind import MalformedRecord
from job.model.marks import ANNOTATION_ORIGINAL_RULES, HEADER_NAMESPACE, WAKER_PORT, WAKER_SERVICE

GROUP = "gateway.networking.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "httproutes"
GRANT_API_VERSION = f"{GROUP}/v1beta1"
GRANT_PLURAL = "referencegrants"
_HEADER_FILTER = "RequestHeaderModifier"


@dataclass(frozen=True)
class Waker:
    """Where the waker's Service is."""

    namespace: str
    service: str = WAKER_SERVICE
    port: int = WAKER_PORT

    def backend(self) -> dict[str, Any]:
        return {"group": "", "kind": "Service", "name": self.service, "namespace": self.namespace,
                "port": self.port, "weight": 1}


def rules_of(route: dict[str, Any]) -> list[dict[str, Any]]:
    rules = (route.get("spec") or {}).get("rules")
    return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []


def record_of(route: dict[str, Any]) -> str | None:
    return ((route.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_ORIGINAL_RULES)


def points_at_waker(rule: dict[str, Any], waker: Waker) -> bool:
    refs = rule.get("backendRefs") or []
    return bool(refs) and all(isinstance(r, dict) and r.get("name") == waker.service
                              and r.get("namespace") == waker.namespace for r in refs)


def frozen_rules(rules: list[dict[str, Any]], *, namespace: str, waker: Waker) -> list[dict[str, Any]]:
    """`rules` with every rule that sends to backends sending to the waker, the namespace in its header."""
    out = []
    for original in rules:
        rule = copy.deepcopy(original)
        if rule.get("backendRefs"):
            rule["backendRefs"] = [waker.backend()]
            rule["filters"] = _with_header(rule.get("filters") or [], namespace)
        out.append(rule)
    return out


def _with_header(filters: list[Any], namespace: str) -> list[Any]:
    header = {"name": HEADER_NAMESPACE, "value": namespace}
    for f in filters:
        if isinstance(f, dict) and f.get("type") == _HEADER_FILTER:  # at most one per rule: extend it
            modifier = f.setdefault("requestHeaderModifier", {})
            kept = [h for h in modifier.get("set") or [] if str(h.get("name", "")).lower() != HEADER_NAMESPACE.lower()]
            modifier["set"] = [*kept, header]
            return filters
    return [*filters, {"type": _HEADER_FILTER, "requestHeaderModifier": {"set": [header]}}]


def record(rules: list[dict[str, Any]]) -> str:
    return json.dumps(rules, sort_keys=True, separators=(",", ":"))


def restored_rules(original: str) -> list[dict[str, Any]]:
    """The rules a record holds. Raises MalformedRecord."""
    try:
        rules = json.loads(original)
    except ValueError:
        rules = None
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise MalformedRecord(f"{ANNOTATION_ORIGINAL_RULES}={shown(original)} is not a JSON list of rules")
    return rules


def grant_name(namespace: str) -> str:
    return f"nsscaler-waker-from-{namespace}"


def grant(namespace: str, waker: Waker) -> dict[str, Any]:
    """The ReferenceGrant, in the waker's namespace, that lets `namespace`'s HTTPRoutes send to the waker."""
    return {"apiVersion": GRANT_API_VERSION, "kind": "ReferenceGrant",
            "metadata": {"name": grant_name(namespace), "namespace": waker.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "nsscaler"}},
            "spec": {"from": [{"group": GROUP, "kind": "HTTPRoute", "namespace": namespace}],
                     "to": [{"group": "", "kind": "Service", "name": waker.service}]}}
