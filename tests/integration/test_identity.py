"""nsscaler says which version it is wherever someone looks: every request it sends carries
`nsscaler/<version>` as its User-Agent (what the API server's audit log records), while the field manager
the server derives from it stays `nsscaler`; and the run's summary line names the version."""

from __future__ import annotations

import json

import pytest

from devtools import builders
from job import __version__
from tests.faults import FaultProxy

pytestmark = pytest.mark.usefixtures("crd")


def test_every_request_names_the_version_and_the_field_manager_stays_nsscaler(
        api, control_plane, run_job, prefix, admin_token, tmp_path):
    ns = prefix + "n0"
    api.create(builders.namespace(ns))
    api.create(builders.deployment(ns, "web", 2))
    api.create(builders.nsscaler(f"{prefix}p", prefix + "n", []))
    with FaultProxy(control_plane, fraction=0.0) as proxy:
        result = run_job("--log-format", "json", kubeconfig=proxy.kubeconfig(tmp_path / "seen", admin_token))
    assert result.exit_code == 0, result.stderr
    assert set(proxy.agents) == {f"nsscaler/{__version__}"}, proxy.agents
    assert sum(proxy.agents.values()) == proxy.forwarded
    web = api.get("Deployment", "web", ns)
    assert web["spec"]["replicas"] == 0
    managers = {entry["manager"] for entry in web["metadata"]["managedFields"]
                if "f:replicas" in json.dumps(entry.get("fieldsV1", {}))}
    assert managers == {"nsscaler"}, web["metadata"]["managedFields"]
    assert result.report["summary"]["version"] == __version__, result.report["summary"]
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert [line["version"] for line in lines if line.get("event") == "summary"] == [__version__], lines[-1:]
