"""What a test leaves behind in the session's control plane, found after its teardown.

Each test works in its own namespace prefix. The `prefix` fixture deletes the prefix's namespaces and NSScalers
itself; anything else the test made must be gone by then: a cluster-scoped object named with the prefix
(ClusterRoles and their bindings, admission policies, FlowSchemas, GatewayClasses, ...), an NSScaler or a
Namespace that did not exist before the test. What is being deleted (a deletion timestamp, a finalizer still at
work) is not a leak; what nobody deletes is, and it fails the test that left it, naming each object. Objects a
session or module fixture installs once and keeps (the CRDs, the shipped overlay) exist before the test starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from devtools.builders import NSSCALER_VERSION, AdminApi

#: cluster-scoped resources a test may create: (API path, plural)
CLUSTER_SCOPED: tuple[tuple[str, str], ...] = (
    ("/api/v1", "namespaces"),
    ("/api/v1", "persistentvolumes"),
    (f"/apis/{NSSCALER_VERSION}", "nsscalers"),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterroles"),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions"),
    ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies"),
    ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings"),
    ("/apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicies"),
    ("/apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicybindings"),
    ("/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
    ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"),
    ("/apis/flowcontrol.apiserver.k8s.io/v1", "flowschemas"),
    ("/apis/flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations"),
    ("/apis/scheduling.k8s.io/v1", "priorityclasses"),
    ("/apis/node.k8s.io/v1", "runtimeclasses"),
    ("/apis/storage.k8s.io/v1", "storageclasses"),
    ("/apis/gateway.networking.k8s.io/v1", "gatewayclasses"),
)
#: kinds whose every new object is the test's own, whatever its name
OWN_WHATEVER_THE_NAME = ("namespaces", "nsscalers")
#: the namespace the shipped overlay installs into: applied once by the fixtures that install it, and kept
SHARED_NAMESPACES = frozenset({"nsscaler"})
#: a name made with a test's prefix (`tests.conftest.prefix`)
PREFIXED = re.compile(r"t[0-9a-f]{6}-")


@dataclass(frozen=True)
class Seen:
    """One object as listed: its plural, name, and whether its deletion has begun."""

    plural: str
    name: str
    going: bool

    def __str__(self) -> str:
        return f"{self.plural}/{self.name}"


def listed(api: AdminApi) -> list[Seen]:
    """Every object of the cluster-scoped resources above that the server serves."""
    found = []
    for path, plural in CLUSTER_SCOPED:
        resp = api.http.get(f"{api.plane.server}{path}/{plural}", timeout=60)
        if resp.status_code == 404:  # not served by this server (a kind GA only lately, a CRD not installed)
            continue
        resp.raise_for_status()
        items: list[dict[str, Any]] = resp.json()["items"]
        found += [Seen(plural, item["metadata"]["name"], bool(item["metadata"].get("deletionTimestamp")))
                  for item in items]
    return found


def before_the_test(api: AdminApi) -> frozenset[str]:
    return frozenset(str(seen) for seen in listed(api))


def left_behind(api: AdminApi, *, prefix: str, before: frozenset[str]) -> list[Seen]:
    """What the test made and nobody is deleting: named with its prefix, or (namespaces and NSScalers) new."""
    def the_tests(seen: Seen) -> bool:
        if seen.name.startswith(prefix):
            return True
        if PREFIXED.match(seen.name):  # another test's, in a session sharing this control plane (`make cluster-up`)
            return False
        new = str(seen) not in before and seen.plural in OWN_WHATEVER_THE_NAME
        return new and not (seen.plural == "namespaces" and seen.name in SHARED_NAMESPACES)
    return [seen for seen in listed(api) if not seen.going and the_tests(seen)]


def remove(api: AdminApi, leaked: list[Seen]) -> None:
    """Delete what a test leaked, so that the next test starts clean (the leaking test fails all the same)."""
    paths = dict((plural, path) for path, plural in CLUSTER_SCOPED)
    for seen in leaked:
        resp = api.http.delete(f"{api.plane.server}{paths[seen.plural]}/{seen.plural}/{seen.name}", timeout=30)
        if resp.status_code not in (200, 202, 404):
            raise AssertionError(f"delete {seen}: {resp.status_code} {resp.text}")
