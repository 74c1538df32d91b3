"""Upgrades keep old records readable: workloads frozen by an earlier nsscaler, kept as files, are restored exactly by
this one, on the real control plane.

Each kept release's `tests/fixtures/releases/<version>/records.yaml` holds, for every kind nsscaler freezes
(built-in, a custom kind with /scale, and a KEDA ScaledObject), the object before its freeze and the object as that
version's freeze left it: every annotation and label of the record, as written. Each file is written once, by the
version it names, and never edited after: a newer nsscaler must restore what is in it. `make keep-release` writes a
released version's file (with `WRITE_RECORD_FIXTURES=<path>`, through
`test_this_version_writes_a_record_on_every_kind`); tests/unit/test_releases.py fails while a released version has
none.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders
from devtools.builders import AdminApi
from job import __version__
from job.model.marks import ANNOTATION_KEDA_PAUSED, DOMAIN
from tests import crds
from tests.integration.test_release import EVERY_KIND, SYSTEM_ANNOTATIONS, make_every_kind

pytestmark = pytest.mark.usefixtures("crd")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: every kept release's records
RECORD_FILES = sorted((FIXTURES / "releases").glob("*/records.yaml"))
#: stand-ins for the namespace and the policy, replaced by each test's own
NS, POLICY = "fixture-ns", "fixture-policy"
KINDS = [*EVERY_KIND, "Fleet.test.nsscaler.io"]
#: (apiVersion, kind as listed by AdminApi)
OBJECTS = [("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("batch/v1", "CronJob"), ("apps/v1", "DaemonSet"),
           ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"), ("test.nsscaler.io/v1", "Fleet"),
           ("keda.sh/v1alpha1", "ScaledObject")]
#: what the API server writes on its own, never part of a record nor of what a restore gives back
_SERVER = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")
_JOB_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name")


def portable(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a user would create it again: no server fields, no status, nothing a controller wrote."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in _SERVER}
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items()
                           if k not in (*SYSTEM_ANNOTATIONS, "deployment.kubernetes.io/revision")}
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k not in _JOB_LABELS}
    spec = dict(obj["spec"])
    if kind == "Job":
        spec.pop("selector", None)
        template = dict(spec["template"])
        template["metadata"] = {**template["metadata"], "labels": {
            k: v for k, v in template["metadata"].get("labels", {}).items() if k not in _JOB_LABELS}}
        spec["template"] = template
    return {"apiVersion": obj["apiVersion"], "kind": kind, "metadata": meta, "spec": spec}


def make_world(api: AdminApi, ns: str) -> None:
    crds.install(api, [*crds.TEST_KINDS, crds.SCALED_OBJECT])
    make_every_kind(api, ns)
    api.create(builders.custom("Fleet", ns, "fleet", {"replicas": 4}))
    api.create(builders.scaled_object(ns, "web-scaler", "web", annotations={ANNOTATION_KEDA_PAUSED: "2"}))


def objects(api: AdminApi, ns: str) -> list[dict[str, Any]]:
    found = []
    for api_version, kind in OBJECTS:
        for o in api.list(kind, ns):
            if not o["metadata"].get("ownerReferences"):
                found.append(portable(kind, {**o, "apiVersion": api_version}))
    return sorted(found, key=lambda o: (o["kind"], o["metadata"]["name"]))


def swap(text: str, pairs: dict[str, str]) -> str:
    for old, new in pairs.items():
        text = text.replace(old, new)
    return text


def test_this_version_writes_a_record_on_every_kind(api: AdminApi, run_job, prefix, tmp_path):
    """What `make keep-release` keeps (into `WRITE_RECORD_FIXTURES`, a path); otherwise written to a temporary file.
    Either way every kind is frozen, with its record beside it."""
    path = Path(os.environ.get("WRITE_RECORD_FIXTURES") or tmp_path / "records.yaml")
    write_records(api, run_job, prefix, path)
    doc = yaml.safe_load(path.read_text())
    assert doc["version"] == __version__
    assert sorted(w["frozen"]["kind"] for w in doc["workloads"]) == sorted(kind for _, kind in OBJECTS)
    for w in doc["workloads"]:
        marks = {k: v for k, v in w["frozen"]["metadata"]["annotations"].items() if k.startswith(DOMAIN)}
        assert marks and w["frozen"] != w["before"], w["frozen"]["kind"]


def write_records(api: AdminApi, run_job: Any, prefix: str, path: Path) -> None:
    """Freeze one workload of every kind with this version and keep the result as its fixture."""
    ns, policy = f"{prefix}v1", f"{prefix}p"
    make_world(api, ns)
    api.create(builders.namespace(f"{prefix}v2"))
    before = objects(api, ns)
    api.create(builders.nsscaler(policy, prefix, ["v2"], kinds=KINDS))
    assert run_job("--restore-wait-in-run", "0").exit_code == 0
    frozen = objects(api, ns)
    pairs = zip(before, frozen, strict=True)
    doc = {"version": __version__, "workloads": [{"before": b, "frozen": f} for b, f in pairs]}
    text = swap(yaml.safe_dump(doc, sort_keys=False), {ns: NS, policy: POLICY})
    path.write_text(
        f"# Records as nsscaler {__version__} writes them (tests/integration/test_record_fixtures.py). Never edit.\n"
        + text)


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: "/".join(p.relative_to(FIXTURES).parts))
def test_this_version_restores_every_record_an_earlier_one_wrote(api: AdminApi, run_job, prefix, path: Path):
    ns, policy = f"{prefix}v1", f"{prefix}p"
    doc = yaml.safe_load(swap(path.read_text(), {NS: ns, POLICY: policy}))
    crds.install(api, [*crds.TEST_KINDS, crds.SCALED_OBJECT])
    api.create(builders.namespace(ns))
    recorded = [w["frozen"] for w in doc["workloads"]]
    assert {o["kind"] for o in recorded} >= {kind for _, kind in OBJECTS}, "every kind has its record"
    assert any(k.startswith(DOMAIN) for o in recorded for k in o["metadata"]["annotations"])
    for obj in recorded:
        api.create(obj)
    # the policy that froze them now keeps the namespace running: every record is restored
    api.create(builders.nsscaler(policy, prefix, ["v1"], kinds=KINDS))

    assert run_job("--restore-wait-in-run", "0").exit_code == 0

    assert objects(api, ns) == [w["before"] for w in doc["workloads"]]
