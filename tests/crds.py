"""CustomResourceDefinitions the tests install: two scalable test kinds, one without /scale, and KEDA's
ScaledObject (only its shape: no KEDA controller runs, nsscaler only writes its annotations).

- `Pool.test.nsscaler.io`: /scale with a nested replica field, `.spec.workers.count`
- `Fleet.test.nsscaler.io`: /scale with `.spec.replicas`
- `Plain.test.nsscaler.io`: no /scale subresource (a policy naming it is InvalidSpec)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from devtools.builders import AdminApi, wait_until

GROUP = "test.nsscaler.io"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "crds"
KEDA_CRD = "scaledobjects.keda.sh"
_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _crd(group: str, kind: str, plural: str, version: str, *, replicas_path: str | None) -> dict[str, Any]:
    served: dict[str, Any] = {"name": version, "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": _OPEN, "status": _OPEN}}}}
    if replicas_path:
        served["subresources"] = {"status": {}, "scale": {"specReplicasPath": replicas_path,
                                                          "statusReplicasPath": ".status.replicas"}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "versions": [served],
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"}}}


TEST_KINDS = [
    _crd(GROUP, "Pool", "pools", "v1", replicas_path=".spec.workers.count"),
    _crd(GROUP, "Fleet", "fleets", "v1", replicas_path=".spec.replicas"),
    _crd(GROUP, "Plain", "plains", "v1", replicas_path=None),
]
#: a kind made up for the rows a platform team adds without code: frozen by `spec.paused: true`, no /scale
PAUSED = _crd(GROUP, "Paused", "pauseds", "v1", replicas_path=None)
#: a kind made up for a row the API server refuses though its CRD's types accept it: `spec.mode` is an enum
#: (running, stopped), so a row setting it to `paused` passes nsscaler's own schema check and fails the dry run
GATED = _crd(GROUP, "Gated", "gateds", "v1", replicas_path=None)
GATED["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
    "type": "object", "properties": {"mode": {"type": "string", "enum": ["running", "stopped"]}}}


def made_up(kind: str, plural: str) -> dict[str, Any]:
    """A kind made up for a team's row (no /scale, an open spec), in the test group."""
    return _crd(GROUP, kind, plural, "v1", replicas_path=None)


SCALED_OBJECT = _crd("keda.sh", "ScaledObject", "scaledobjects", "v1alpha1", replicas_path=None)


#: the folders of the GitOps controllers' CRDs (what a run reads to count refused syncs), not catalogue rows
GITOPS = ("kustomize-controller-1.7.3", "source-controller-1.7.2", "argo-cd-3.5.1")


def _documents(folders: list[Path]) -> list[dict[str, Any]]:
    return [doc for folder in folders for path in sorted(folder.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def operators() -> list[dict[str, Any]]:
    """The operators' real CRDs the catalogue was checked against (tests/fixtures/crds/README.md)."""
    return _documents(sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name not in GITOPS))


def gitops() -> list[dict[str, Any]]:
    """Flux's Kustomization and source CRDs and Argo CD's Application CRD, as their projects publish them."""
    return _documents([FIXTURES / folder for folder in GITOPS])


def install(api: AdminApi, crds: list[dict[str, Any]]) -> None:
    """Create the CRDs that are not there yet and wait until the API server serves them."""
    for crd in crds:
        name = crd["metadata"]["name"]
        if not api.exists("CustomResourceDefinition", name):
            api.create(crd)
        wait_until(lambda name=name: api.crd_established(name), timeout=30, what=f"CRD {name}")
        wait_until(lambda crd=crd: _listed(api, crd), timeout=60, what=f"the objects of CRD {name} listed")


def _listed(api: AdminApi, crd: dict[str, Any]) -> bool:
    """A LIST by label of the CRD's objects is answered: established comes before the API server's cache of a new
    kind is ready, and until then such a LIST answers 429 ("storage is (re)initializing")."""
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("served"))
    url = f"{api.plane.server}/apis/{spec['group']}/{version}/{spec['names']['plural']}"
    return api.http.get(url, params={"labelSelector": "nsscaler.wubw.fun/scaled=true"}, timeout=30).status_code == 200
