"""Upgrades from a real earlier release: the chart package and the wheel of each kept release
(tests/fixtures/releases/<version>/, kept by `make keep-release`) installed and run as that version shipped, its
namespaces frozen by that version's own code, then `helm upgrade` to the working tree's chart, and this version's
run gives everything back exactly: records written by the old version, read by the new one.

Like tests/integration/test_helm.py (whose helpers these are), on a control plane of its own, with no kubelet: a
Job's Pod is run as its command line, environment and ServiceAccount token, here by the kept wheel's `nsscaler`
for the old release (imported from the wheel itself, ahead of the working tree's package) and by the working
tree's after the upgrade.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import builders, release
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from job import __version__
from job.model.marks import DOMAIN
from tests.conftest import built_tool, kubectl, plane_of_its_own
from tests.integration.test_helm import (
    CHART,
    CRDS,
    NAMESPACE,
    RELEASE,
    clear_recreated_role,
    run,
    run_cronjob,
    run_pod_command,
    uninstall,
    values_file,
)
from tests.integration.test_release import EVERY_KIND, family, make_every_kind, marks_left, settled_family

pytestmark = pytest.mark.versions

#: the values that keep an install of 0.1.0 where it is: its objects in the namespace nsscaler,
#: which the chart made (and removes on uninstall), the release recorded in `default`
UPGRADED_FROM_DEFAULT = {"namespace": {"name": NAMESPACE, "create": True}}


@pytest.fixture(scope="module")
def helm() -> str:
    return str(built_tool("helm"))


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    with plane_of_its_own(tmp_path_factory, "upgrade-plane") as started:
        yield started


def charts_installed(helm: str, plane: controlplane.ControlPlane) -> list[str]:
    """`helm history`: the chart of each revision of the release, oldest first."""
    out = run(helm, "history", RELEASE, "-n", "default", "-o", "json", kubeconfig=plane.admin_kubeconfig).stdout
    return [revision["chart"] for revision in json.loads(out)]


def frozen_marks(api: AdminApi, prefix: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """Every workload's nsscaler annotations and labels (its record), by (kind, namespace, name)."""
    return {k: {m: v for m, v in {**seen["annotations"], **seen["labels"]}.items() if m.startswith(DOMAIN)}
            for k, seen in family(api, prefix).items()}


def first_run_after_upgrade(plane: controlplane.ControlPlane, api: AdminApi, tmp_path: Path) -> None:
    """The new version's first runs. An admission policy takes effect a moment after `helm upgrade` changes it
    (seconds here, as the hold tests saw): a run in that moment finds the old run-admission policy still refusing
    its hold marks. It then says so in one error line per namespace, gives back what it must all the same and
    exits 1; a later run writes the marks. Runs are started until one exits 0 (within a minute); any other
    failure fails the test at once."""
    attempts = iter(range(100))

    def clean_run() -> bool:
        name = f"new-{next(attempts)}"
        subprocess.run([kubectl(), "--kubeconfig", str(plane.admin_kubeconfig), "-n", NAMESPACE, "create", "job",
                        "--from=cronjob/nsscaler", name], check=True, capture_output=True)
        done = run_pod_command(plane, api.get("Job", name, NAMESPACE)["spec"]["template"]["spec"], NAMESPACE,
                               tmp_path)
        errors = [line["message"] for line in map(json.loads, done.stderr.splitlines())
                  if line["level"] == "error" and line.get("event") != "summary"]
        assert done.returncode in (0, 1) and all(
            e.startswith("could not write the hold mark of namespace") for e in errors), done.stderr
        return done.returncode == 0
    wait_until(clean_run, timeout=60, what="a run of the upgraded install that writes its hold marks")


@pytest.mark.parametrize("version", release.kept())
def test_an_upgrade_from_a_kept_release_restores_what_that_release_froze(helm, plane, tmp_path, version):
    api, prefix = AdminApi(plane), "upgrade-"
    kept = release.RELEASES / version
    wheel, package = kept / release.wheel(version), kept / release.chart_package(version)
    assert version != __version__, "the working tree is a newer version than every kept one"
    clear_recreated_role(api)
    run(helm, "install", RELEASE, str(package), "-n", "default", "-f", values_file(tmp_path, {}),
        kubeconfig=plane.admin_kubeconfig)
    wait_until(api.crd_established, what="the kept chart's CRD")
    cron = api.get("CronJob", "nsscaler", NAMESPACE)
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"].endswith(f":{version}")
    for f in "ab":
        make_every_kind(api, f"{prefix}{f}-v1")
        api.create(builders.namespace(f"{prefix}{f}-v2"))
    before = settled_family(api, prefix)
    for f in "ab":
        api.create(builders.nsscaler(f"{prefix}{f}", f"{prefix}{f}-", ["v2"], kinds=EVERY_KIND))

    # the old release's own code freezes: its wheel says its version, and its run writes its records
    said = run_pod_command(plane, {**cron["spec"]["jobTemplate"]["spec"]["template"]["spec"], "containers": [{
        **cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0], "args": ["--version"]}]},
        NAMESPACE, tmp_path, wheel=wheel)
    assert said.stdout.strip() == f"nsscaler {version}", said.stdout + said.stderr
    run_cronjob(plane, api, tmp_path, "old-1", wheel=wheel)
    frozen, records = family(api, prefix), frozen_marks(api, prefix)
    assert all(frozen[k] != before[k] for k in before), "the old release froze every workload of every kind"
    assert all(records.values()) and len(records) == len(before), records

    # the upgrade changes the installed objects only: the records stay on the workloads, as the old release wrote
    # 0.1.0 recorded itself in `default` and made the namespace nsscaler: the upgrade says so
    run(helm, "upgrade", RELEASE, str(CHART), "-n", "default", "-f", values_file(tmp_path, UPGRADED_FROM_DEFAULT),
        kubeconfig=plane.admin_kubeconfig)
    assert charts_installed(helm, plane) == [f"nsscaler-{version}", f"nsscaler-{__version__}"]
    image = api.get("CronJob", "nsscaler", NAMESPACE)["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"][0]["image"]
    assert image.endswith(f":{__version__}"), image
    assert family(api, prefix) == frozen and frozen_marks(api, prefix) == records

    # this version's run reads the old records: family a back exactly, family b still held as the old run left it
    api.patch("NSScaler", f"{prefix}a", {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
    first_run_after_upgrade(plane, api, tmp_path)
    now = family(api, prefix)
    assert {k: v for k, v in now.items() if k[1].startswith(f"{prefix}a-")} == {
        k: v for k, v in before.items() if k[1].startswith(f"{prefix}a-")}
    assert {k: v for k, v in now.items() if k[1].startswith(f"{prefix}b-")} == {
        k: v for k, v in frozen.items() if k[1].startswith(f"{prefix}b-")}

    # the new chart's uninstall gives back the rest, from the old release's records
    result, runs = uninstall(helm, plane, api, tmp_path, release_namespace="default")
    assert result.returncode == 0, result.stderr
    assert [r.returncode for r in runs] == [0], [r.stderr for r in runs]
    assert family(api, prefix) == before
    assert marks_left(api, prefix) == []
    wait_until(lambda: not api.exists("Namespace", NAMESPACE), timeout=120, what="the chart's namespace gone")


def test_the_working_chart_installs_with_the_waker_and_uninstalls_giving_everything_back(helm, plane, tmp_path):
    """The chart with `waker.enabled` on this server: its objects installed, a run, and an uninstall that gives the
    frozen Deployment back before it removes the CronJob and the waker."""
    api, prefix = AdminApi(plane), "waker-chart-"
    clear_recreated_role(api)
    # the CRDs the upgraded release kept name it (`default`): what docs/operating/helm.md says to do before
    # installing a release of another name or namespace
    for name in CRDS:
        if api.exists("CustomResourceDefinition", name):
            api.patch("CustomResourceDefinition", name, {"metadata": {"annotations": {
                "meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": NAMESPACE}}})
    waker_on = values_file(tmp_path, {"waker": {"enabled": True}})
    run(helm, "install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", "-f", waker_on,
        kubeconfig=plane.admin_kubeconfig)
    wait_until(api.crd_established, what="the chart's CRD")
    for kind in ("Deployment", "Service", "ServiceAccount"):
        assert api.exists(kind, "nsscaler-waker", NAMESPACE), kind
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    run_cronjob(plane, api, tmp_path, "waker-1")
    assert api.replicas("Deployment", ns, "web") == 0

    result, runs = uninstall(helm, plane, api, tmp_path)

    assert result.returncode == 0, result.stderr
    assert [r.returncode for r in runs] == [0], [r.stderr for r in runs]
    assert api.replicas("Deployment", ns, "web") == 3
    wait_until(lambda: not api.exists("Deployment", "nsscaler-waker", NAMESPACE), what="the waker gone")
    assert not api.exists("ClusterRole", "nsscaler-waker")

