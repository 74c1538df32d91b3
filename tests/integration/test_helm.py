"""The Helm chart with real helm (v4, built from its Go module) against a real control plane: generated from
kustomize (the defaults render exactly prod's objects), values checked by its schema, every rendering accepted
by the API server, and a whole life: install, a run, an upgrade while namespaces are frozen, an uninstall that
gives everything back first (or fails, loudly).

The chart installs cluster-wide objects (CRDs, ClusterRoles, a PriorityClass) and its uninstall releases every
workload nsscaler holds anywhere, so these tests get a control plane of their own (the same build as the
session's), where deleting the CRDs touches no other test.

No kubelet runs here. Where a Job's Pod must run (a run of the CronJob, the release hook), the test runs that
Pod's own command line and environment with the ServiceAccount's real token, and then writes the Pod's status as
a kubelet would (phase and exit code): the real Job controller turns that into the Job's success or failure, and
real helm waits on it. The node tier runs those Pods on a real kubelet (tests/node/test_helm_on_node.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import builders, chart
from devtools.builders import AdminApi, wait_until
from devtools.cluster import controlplane
from devtools.cluster.versions import cache_root
from job import __version__
from job.model.marks import ANNOTATION_EXCLUDE, ANNOTATION_RELEASED
from tests.conftest import ROOT, built_tool, kubectl, plane_of_its_own
from tests.integration.test_release import EVERY_KIND, family, make_every_kind, marks_left

CHART = ROOT / "charts" / "nsscaler"
NAMESPACE = "nsscaler"
#: the release is named as a user names it, and recorded in its own namespace (`-n nsscaler --create-namespace`)
RELEASE = "nss"
#: the one value every install must give: the chart has no default image
IMAGE = "registry.example.com/platform/nsscaler"
CRDS = ("nsscalers.operators.wubw.fun", "wakes.operators.wubw.fun", "nsscalerkinds.operators.wubw.fun")
KEEP = "helm.sh/resource-policy"


@pytest.fixture(scope="module")
def helm() -> str:
    return str(built_tool("helm"))


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    with plane_of_its_own(tmp_path_factory, "helm-plane") as started:
        yield started


@pytest.fixture(scope="module")
def plane_api(plane: controlplane.ControlPlane) -> AdminApi:
    return AdminApi(plane)


def helm_env() -> dict[str, str]:
    """helm's own cache, config and data in the tools' cache, never the user's."""
    home = cache_root() / "helm-home"
    return {**os.environ, **{f"HELM_{part}_HOME": str(home / part.lower()) for part in ("CACHE", "CONFIG", "DATA")}}


def run(helm: str, *args: str, kubeconfig: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = helm_env()
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    result = subprocess.run([helm, *args], capture_output=True, text=True, env=env, check=False, timeout=600)
    if check and result.returncode:
        raise AssertionError(f"helm {' '.join(args)} (exit {result.returncode}):\n{result.stdout}{result.stderr}")
    return result


def values_file(tmp_path: Path, values: dict[str, Any], *, image: bool = True) -> str:
    """The values as a file, with the image repository every install needs unless `image` is false."""
    if image:
        values = {**values, "image": {"repository": IMAGE, **values.get("image", {})}}
    path = tmp_path / f"values-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def template(helm: str, tmp_path: Path, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = run(helm, "template", RELEASE, str(CHART), "-n", NAMESPACE, "-f", values_file(tmp_path, values or {})).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def key(o: dict[str, Any]) -> tuple[str, str, str, str]:
    return (o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def is_hook(o: dict[str, Any]) -> bool:
    return "helm.sh/hook" in (o["metadata"].get("annotations") or {})


def without_keep(o: dict[str, Any]) -> dict[str, Any]:
    """The object without helm's own instruction to keep it on uninstall (not part of the object the API holds
    as the user's: it only tells helm what not to delete)."""
    meta = dict(o["metadata"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != KEEP}
    meta.pop("annotations", None)
    if annotations:
        meta["annotations"] = annotations
    return {**o, "metadata": meta}


# -- the chart as files --------------------------------------------------------------------------------------------

def test_the_chart_is_what_make_chart_generates_from_kustomize():
    assert chart.stale(chart.files()) == [], "charts/nsscaler is stale: run `make chart`"


def test_helm_lint_strict_passes(helm):
    out = run(helm, "lint", "--strict", str(CHART), "--set", f"image.repository={IMAGE}")
    assert "0 chart(s) failed" in out.stdout + out.stderr


def test_default_values_render_exactly_the_prod_overlay_object_by_object(helm, tmp_path):
    """Given prod's image and installed in `nsscaler`, the chart is prod but for the Namespace, which
    `--create-namespace` makes."""
    rendered = [without_keep(o) for o in template(helm, tmp_path) if not is_hook(o)]
    prod = [o for o in chart.build(chart.PROD) if o["kind"] != "Namespace"]
    assert sorted(map(key, rendered)) == sorted(map(key, prod))
    by_key = {key(o): o for o in rendered}
    for o in prod:
        assert by_key[key(o)] == o, f"{key(o)} differs between the chart and kustomize/overlays/prod"


def test_defaults_install_no_policy_and_crds_are_kept(helm, tmp_path):
    docs = template(helm, tmp_path)
    assert not [o for o in docs if o["kind"] in ("NSScaler", "Wake")]
    crds = [o for o in docs if o["kind"] == "CustomResourceDefinition"]
    assert sorted(o["metadata"]["name"] for o in crds) == sorted(CRDS)
    assert all(o["metadata"]["annotations"][KEEP] == "keep" for o in crds)


def test_one_version_for_chart_image_and_package(helm, tmp_path):
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert meta["version"] == meta["appVersion"] == __version__
    (cron,) = [o for o in template(helm, tmp_path) if o["kind"] == "CronJob"]
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"].endswith(f":{__version__}")
    run(helm, "package", str(CHART), "-d", str(tmp_path))
    assert (tmp_path / f"nsscaler-{__version__}.tgz").exists()


@pytest.mark.parametrize(("values", "words"), [
    pytest.param({"schedule": "every day"}, "schedule", id="schedule-not-cron"),
    pytest.param({"resources": "lots"}, "resources", id="resources-a-string"),
    pytest.param({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy", id="pull-policy"),
    pytest.param({"image": {"digest": "latest"}}, "digest", id="digest-not-sha256"),
    pytest.param({"priorityClass": {"enabled": "yes"}}, "priorityClass", id="switch-not-boolean"),
    pytest.param({"tolerations": {"key": "x"}}, "tolerations", id="tolerations-not-a-list"),
    pytest.param({"replicas": 3}, "replicas", id="unknown-value"),
    pytest.param({"podSecurityContext": {"runAsUser": -1}}, "runAsUser", id="negative-user"),
    pytest.param({"commonLabels": {"team": "a b"}}, "commonLabels", id="label-value-with-a-space"),
    pytest.param({"waker": {"enabled": True, "replicas": 0}}, "replicas", id="no-waker-replica"),
    pytest.param({"serviceAccount": {"name": "Nsscaler"}}, "serviceAccount", id="service-account-not-a-name"),
    pytest.param({"metrics": {"enabled": True, "runbookBaseUrl": "runbooks"}}, "runbookBaseUrl", id="runbook-url"),
])
def test_a_wrong_value_fails_helm_install_with_the_schemas_message(helm, plane, tmp_path, values, words):
    result = run(helm, "install", RELEASE, str(CHART), "-n", "default", "-f", values_file(tmp_path, values),
                 kubeconfig=plane.admin_kubeconfig, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
    assert words in result.stderr, result.stderr


# -- every rendering, accepted by the API server ---------------------------------------------------------------------

POD_SETTINGS = {
    "image": {"repository": "registry.example.com/other/nsscaler", "digest": "sha256:" + "a" * 64,
              "pullPolicy": "Always", "pullSecrets": [{"name": "regcred"}]},
    "schedule": "@hourly", "timeZone": "Europe/Berlin", "suspend": True,
    "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "256Mi"}},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}}]}},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                   "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "nsscaler"}}}],
    "podLabels": {"team": "platform"}, "podAnnotations": {"example.com/owner": "platform"},
    "dryRun": True, "extraArgs": ["--max-freeze=500"], "extraEnv": [{"name": "NSSCALER_LOG_LEVEL", "value": "debug"}],
}
#: what a platform team sets on day one: every value besides the Pod settings above, none at its default
PLATFORM = {
    "commonLabels": {"team": "platform", "cost-center": "c42"},
    "serviceAccount": {"create": True, "name": "platform-nsscaler", "annotations": {"example.com/role": "reader"}},
    "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 5, "startingDeadlineSeconds": 120,
    "backoffLimit": 0, "ttlSecondsAfterFinished": 3600,
    "podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": 2000},
    "securityContext": {"readOnlyRootFilesystem": True, "runAsNonRoot": True},
    "priorityClass": {"enabled": True, "existingName": "platform-batch"},
    "schedule": "@hourly",
    "metrics": {"enabled": True, "prometheusRule": {"namespace": "monitoring", "labels": {
        "release": "kube-prometheus-stack"}}, "kubeStateMetrics": {
        "namespace": "monitoring", "serviceAccount": "kps-kube-state-metrics"},
        "runbookBaseUrl": "https://runbooks.example.com/nsscaler/", "runbookSuffix": ".html"},
    "waker": {"enabled": True, "replicas": 3, "resources": {"requests": {"cpu": "30m", "memory": "70Mi"}},
              "nodeSelector": {"pool": "edge"},
              "tolerations": [{"key": "edge", "operator": "Exists", "effect": "NoSchedule"}],
              "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                  "weight": 1, "preference": {"matchExpressions": [{"key": "pool", "operator": "In",
                                                                     "values": ["edge"]}]}}]}},
              "gatewayNamespaceLabels": {"kubernetes.io/metadata.name": "traefik"},
              "podMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}, "interval": "30s"}},
}
#: kinds of the Prometheus Operator, whose CRDs this cluster has not: checked for their kind and group only
PROMETHEUS_OPERATOR = ("PrometheusRule", "PodMonitor")
MATRIX = [
    pytest.param({}, id="defaults"),
    pytest.param(POD_SETTINGS, id="every-pod-setting"),
    pytest.param({"priorityClass": {"enabled": False}, "flowSchema": {"enabled": False}, "wake": {"enabled": False},
                  "crds": {"install": False, "keep": False}, "release": {"onUninstall": False}}, id="everything-off"),
    pytest.param({"metrics": {"enabled": True}}, id="metrics"),
    pytest.param({"wakeRequesterStamp": {"enabled": True}}, id="wake-requester-stamp"),
    pytest.param({"operatorKinds": {"enabled": True}}, id="operator-kinds"),
    pytest.param({"gitopsSyncs": {"enabled": True}}, id="gitops-syncs"),
    pytest.param({"waker": {"enabled": True}}, id="waker"),
    pytest.param({"namespace": {"name": "platform-nsscaler", "create": True}}, id="other-namespace"),
    pytest.param(PLATFORM, id="platform-values"),
]


def server_dry_run(plane: controlplane.ControlPlane, docs: list[dict[str, Any]], tmp_path: Path) -> str:
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = subprocess.run([kubectl(), "--kubeconfig", str(plane.admin_kubeconfig), "apply", "--dry-run=server",
                             "-f", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("values", MATRIX)
def test_every_rendering_is_accepted_by_the_api_server(helm, plane, plane_api, tmp_path, values):
    """The CRDs and the namespace go first for real (a dry run of a CR needs its CRD), then everything else
    with `--dry-run=server`. The PrometheusRule needs the Prometheus Operator's CRD, which this cluster has not:
    it is checked for its kind only."""
    docs = template(helm, tmp_path, values)
    rules = [o for o in docs if o["kind"] in PROMETHEUS_OPERATOR]
    assert all(o["apiVersion"] == "monitoring.coreos.com/v1" for o in rules)
    for name in {NAMESPACE, *(o["metadata"].get("namespace") for o in docs)} - {None, "kube-system"}:
        if not plane_api.exists("Namespace", name) and name not in [o["metadata"]["name"] for o in docs
                                                                     if o["kind"] == "Namespace"]:
            plane_api.create(builders.namespace(name))  # what --create-namespace (or the user) makes
    namespaces = [o for o in docs if o["kind"] == "Namespace"]
    for o in namespaces:
        plane_api.create(o)
    try:
        server_dry_run(plane, [o for o in docs if o["kind"] not in (*PROMETHEUS_OPERATOR, "Namespace")], tmp_path)
    finally:
        for o in namespaces:  # the install tests below install the namespace themselves
            plane_api.delete("Namespace", o["metadata"]["name"])
            wait_until(lambda o=o: not plane_api.exists("Namespace", o["metadata"]["name"]), what="the namespace gone")
    (cron,) = [o for o in docs if o["kind"] == "CronJob"]
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]
    waker = [o["kind"] for o in docs if o["metadata"]["name"] == "nsscaler-waker" and o["kind"] in (
        "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ServiceAccount")]
    assert sorted(waker) == (sorted(["Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ServiceAccount"])
                             if values.get("waker", {}).get("enabled") else []), waker
    if values is POD_SETTINGS:
        spec = pod["spec"]
        container = spec["containers"][0]
        assert container["image"] == "registry.example.com/other/nsscaler@sha256:" + "a" * 64
        assert container["args"] == ["--max-freeze=500"]
        assert {"name": "NSSCALER_DRY_RUN", "value": "true"} in container["env"]
        assert pod["metadata"]["labels"]["team"] == "platform"
        assert spec["tolerations"] == POD_SETTINGS["tolerations"] and cron["spec"]["suspend"] is True
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]


def test_without_an_image_repository_the_install_fails_naming_the_value(helm, plane, tmp_path):
    result = run(helm, "install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace",
                 "-f", values_file(tmp_path, {}, image=False), kubeconfig=plane.admin_kubeconfig, check=False)
    assert result.returncode != 0
    assert "image.repository is required: set it to your nsscaler image" in result.stderr, result.stderr
    assert run(helm, "list", "-n", NAMESPACE, "-q", kubeconfig=plane.admin_kubeconfig).stdout.strip() == ""


# -- a whole life: install, run, upgrade while frozen, uninstall ----------------------------------------------------

def run_pod_command(plane: controlplane.ControlPlane, pod_spec: dict[str, Any], namespace: str,
                    tmp_path: Path, *, wheel: Path | None = None,
                    uid: int | None = None) -> subprocess.CompletedProcess[str]:
    """The Pod's container as its image would run it (`nsscaler` and the args), its environment, and its
    ServiceAccount's real token. With `wheel`, the `nsscaler` of that wheel (a kept release's: a pure wheel is
    importable as it is, ahead of the working tree's package), run from a folder outside the working tree. With
    `uid`, as that user in group 0, as OpenShift runs a Pod that names no user (from a folder that user may read:
    the token and the cluster's CA copied there)."""
    (container,) = pod_spec["containers"]
    if uid is not None:
        tmp_path = Path(tempfile.mkdtemp(prefix="nsscaler-uid-"))
        tmp_path.chmod(0o755)
    kubeconfig = plane.service_account_kubeconfig(tmp_path / "sa.kubeconfig", namespace, pod_spec["serviceAccountName"])
    if uid is not None:
        doc = yaml.safe_load(kubeconfig.read_text())
        doc["clusters"][0]["cluster"]["certificate-authority"] = str(shutil.copy(plane.ca_cert, tmp_path / "ca.crt"))
        kubeconfig.write_text(yaml.safe_dump(doc))
        for readable in (kubeconfig, tmp_path / "ca.crt"):
            readable.chmod(0o644)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NSSCALER_") and k not in ("KUBECONFIG", "PYTHONPATH")}
    for item in container.get("env", []):  # the downward API: the Pod's account, else its namespace as any name
        field = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        env[item["name"]] = (pod_spec["serviceAccountName"] if field == "spec.serviceAccountName"
                             else namespace if "valueFrom" in item else item["value"])
    env["NSSCALER_KUBECONFIG"] = str(kubeconfig)
    program = [str(Path(sys.executable).parent / "nsscaler")]
    if wheel is not None:
        env["PYTHONPATH"] = str(wheel)
        program = [sys.executable, "-m", "job"]
    elif uid is not None:
        env["PYTHONPATH"] = readable_runtime(tmp_path / "runtime")
        program = [os.path.realpath(sys.executable), "-m", "job"]
    def as_user() -> None:
        if uid is not None:
            os.setgroups([])
            os.setgid(0)
            os.setuid(uid)
    if uid is not None:
        env["HOME"] = str(tmp_path)
    try:
        return subprocess.run([*program, *container.get("args", [])], env=env, capture_output=True, text=True,
                              timeout=600, check=False, cwd=tmp_path, preexec_fn=as_user if uid is not None else None)
    finally:
        if uid is not None:
            shutil.rmtree(tmp_path)


def readable_runtime(folder: Path) -> str:
    """nsscaler and its libraries where any user may read them, as an image holds them: the checkout (and so
    .venv) may sit in a folder only its owner can enter (a CI's `mktemp -d`). Hard links where the file system
    allows (no copy of 300 MB), copies elsewhere; the interpreter is Debian's, readable by all. Returns the
    PYTHONPATH."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    site = Path(yaml.__file__).resolve().parent.parent  # .venv's site-packages
    shutil.copytree(site, folder / "site", copy_function=link, ignore=shutil.ignore_patterns("*.pth", "__pycache__"))
    shutil.copytree(ROOT / "job", folder / "src" / "job", copy_function=link,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in (folder, *folder.rglob("*")):
        if path.is_dir():
            path.chmod(0o755)
    return os.pathsep.join((str(folder / "src"), str(folder / "site")))


def run_cronjob(plane: controlplane.ControlPlane, api: AdminApi, tmp_path: Path, name: str, *,
                wheel: Path | None = None, uid: int | None = None) -> subprocess.CompletedProcess[str]:
    """`kubectl create job --from=cronjob/nsscaler`, and its Pod's command run (by `wheel`'s nsscaler, if given)."""
    subprocess.run([kubectl(), "--kubeconfig", str(plane.admin_kubeconfig), "-n", NAMESPACE, "create", "job",
                    "--from=cronjob/nsscaler", name], check=True, capture_output=True)
    job = api.get("Job", name, NAMESPACE)
    done = run_pod_command(plane, job["spec"]["template"]["spec"], NAMESPACE, tmp_path, wheel=wheel, uid=uid)
    assert done.returncode == 0, done.stderr
    return done


def kubelet_ends(api: AdminApi, pod: dict[str, Any], code: int) -> None:
    """What a kubelet reports when the Pod's only container exits with `code`."""
    name = pod["spec"]["containers"][0]["name"]
    api.patch("Pod", pod["metadata"]["name"], {"status": {
        "phase": "Succeeded" if code == 0 else "Failed",
        "containerStatuses": [{"name": name, "ready": False, "restartCount": 0, "image": pod["spec"]["containers"][0][
            "image"], "imageID": "", "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0
                                                               else "Error"}}}]}}, namespace=NAMESPACE, sub="status")


def uninstall(helm: str, plane: controlplane.ControlPlane, api: AdminApi, tmp_path: Path, *,
              release_namespace: str = NAMESPACE) -> tuple[
        subprocess.CompletedProcess[str], list[subprocess.CompletedProcess[str]]]:
    """`helm uninstall --wait`, while each Pod of its release hook Job runs as a kubelet would run it."""
    env = {**helm_env(), "KUBECONFIG": str(plane.admin_kubeconfig)}
    proc = subprocess.Popen([helm, "uninstall", RELEASE, "-n", release_namespace, "--wait", "--timeout", "10m"],
                            env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs: list[subprocess.CompletedProcess[str]] = []
    handled: set[str] = set()
    try:
        while proc.poll() is None:
            pods = [p for p in api.pods(NAMESPACE) if p["metadata"].get("labels", {}).get("job-name") ==
                    "nsscaler-release" and p["metadata"]["uid"] not in handled
                    and p.get("status", {}).get("phase") == "Pending"]
            for pod in pods:
                handled.add(pod["metadata"]["uid"])
                runs.append(run_pod_command(plane, pod["spec"], NAMESPACE, tmp_path))
                kubelet_ends(api, pod, runs[-1].returncode)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), runs


def clear_recreated_role(api: AdminApi) -> None:
    """What docs/operating/uninstall.md tells a user to do before installing another release. The chart keeps the
    aggregated `ClusterRole nsscaler` on uninstall (the clusterrole-aggregation controller writes it by server-side
    apply, which created it again when its write landed just after helm deleted it, about one uninstall in two here
    under load, and `helm uninstall --wait` then waited for ever). Kept, it is emptied with the roles it gathers; the
    same release takes it back on its next install, another release would refuse to adopt it. Removed only when no
    binding refers to it and it grants nothing."""
    def gone() -> bool:
        return not api.exists("ClusterRole", "nsscaler")
    if gone() or [b for b in api.list("ClusterRoleBinding") if b["roleRef"]["name"] == "nsscaler"]:
        return
    wait_until(lambda: not api.get("ClusterRole", "nsscaler").get("rules"), what="the kept ClusterRole emptied")
    api.delete("ClusterRole", "nsscaler")
    wait_until(gone, what="the kept ClusterRole to go")


def install(helm: str, plane: controlplane.ControlPlane, tmp_path: Path, values: dict[str, Any],
            verb: str = "install") -> None:
    """The usual line: the release and the chart's objects in `nsscaler`, which helm creates if need be."""
    if verb == "install":
        clear_recreated_role(AdminApi(plane))
    run(helm, verb, RELEASE, str(CHART), "-n", NAMESPACE, *(["--create-namespace"] if verb == "install" else []),
        "-f", values_file(tmp_path, values), kubeconfig=plane.admin_kubeconfig)


def nothing_installed_left(helm: str, plane: controlplane.ControlPlane, api: AdminApi) -> None:
    """The release and its namespaced objects are gone; the namespace helm created stays, as helm leaves it."""
    assert run(helm, "list", "-n", NAMESPACE, "-q", kubeconfig=plane.admin_kubeconfig).stdout.strip() == ""
    for kind, name in (("CronJob", "nsscaler"), ("ServiceAccount", "nsscaler"), ("Role", "nsscaler-run-lease"),
                       ("Job", "nsscaler-release")):
        assert not api.exists(kind, name, NAMESPACE), (kind, name)
    assert not api.exists("ClusterRoleBinding", "nsscaler")
    if api.exists("ClusterRole", "nsscaler"):  # kept, and so never waited for: emptied, it grants nothing
        wait_until(lambda: not api.get("ClusterRole", "nsscaler").get("rules"), what="the kept ClusterRole emptied")


def test_install_run_upgrade_while_frozen_and_uninstall_gives_everything_back(helm, plane, plane_api, tmp_path):
    api, prefix = plane_api, "life-"
    install(helm, plane, tmp_path, {})
    wait_until(api.crd_established, what="the chart's CRD")
    for f in "ab":
        make_every_kind(api, f"{prefix}{f}-v1")
        api.create(builders.namespace(f"{prefix}{f}-v2"))
    before = family(api, prefix)
    for f in "ab":
        api.create(builders.nsscaler(f"{prefix}{f}", f"{prefix}{f}-", ["v2"], kinds=EVERY_KIND))
    run_cronjob(plane, api, tmp_path, "run-1")
    frozen = family(api, prefix)
    assert all(frozen[k] != before[k] for k in before), "every workload of every kind is frozen"

    # an upgrade with new values while namespaces are frozen: the records survive, the next run restores exactly
    install(helm, plane, tmp_path, {"schedule": "*/5 * * * *", "podLabels": {"team": "platform"},
                                    "priorityClass": {"enabled": False},
                                    "resources": {"requests": {"cpu": "60m", "memory": "80Mi"}}}, verb="upgrade")
    cron = api.get("CronJob", "nsscaler", NAMESPACE)
    assert cron["spec"]["schedule"] == "*/5 * * * *"
    assert "priorityClassName" not in cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert family(api, prefix) == frozen
    api.patch("NSScaler", f"{prefix}a", {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
    run_cronjob(plane, api, tmp_path, "run-2")
    now = family(api, prefix)
    assert {k: v for k, v in now.items() if k[1].startswith(f"{prefix}a-")} == {
        k: v for k, v in before.items() if k[1].startswith(f"{prefix}a-")}

    # frozen again, and then the uninstall: its hook gives every workload back before anything is removed
    api.patch("NSScaler", f"{prefix}a", {"spec": {"active_namespace_suffixes": ["v2"]}})
    run_cronjob(plane, api, tmp_path, "run-3")
    assert family(api, prefix) == frozen
    result, runs = uninstall(helm, plane, api, tmp_path)
    assert result.returncode == 0, result.stderr
    assert [r.returncode for r in runs] == [0], [r.stderr for r in runs]
    assert family(api, prefix) == before
    assert marks_left(api, prefix) == []
    assert all(api.exists("CustomResourceDefinition", name) for name in CRDS), "CRDs are kept by default"
    assert not api.exists("CronJob", "nsscaler", NAMESPACE)
    nothing_installed_left(helm, plane, api)

    # installed again, asked not to keep its CRDs: the uninstall removes them (and every NSScaler with them)
    install(helm, plane, tmp_path, {"crds": {"install": True, "keep": False}})
    result, runs = uninstall(helm, plane, api, tmp_path)
    assert result.returncode == 0, result.stderr
    wait_until(lambda: not any(api.exists("CustomResourceDefinition", name) for name in CRDS),
               what="the CRDs to be removed")
    nothing_installed_left(helm, plane, api)


def documented_release_in_the_cluster() -> str:
    """The one-line release of docs/operating/uninstall.md, exactly as a user copies it."""
    (line,) = [line for line in (ROOT / "docs/operating/uninstall.md").read_text().splitlines()
               if "create job nsscaler-release-manual" in line]
    return line


def test_a_release_in_the_cluster_stops_every_later_run_and_the_uninstall_then_finishes(helm, plane, plane_api,
                                                                                          tmp_path):
    """The documented release without a checkout (a Job from the CronJob's own template, `kubectl` alone), its Pod
    run with the ServiceAccount's real token under the chart's admission policy: everything comes back, the
    CronJob is suspended and marked, and a run started from the CronJob afterwards, while the policy still holds
    its namespace, freezes nothing. The uninstall's own release then finds nothing to do and finishes."""
    api, prefix = plane_api, "after-"
    install(helm, plane, tmp_path, {})
    wait_until(api.crd_established, what="the chart's CRD")
    notes = run(helm, "get", "notes", RELEASE, "-n", NAMESPACE, kubeconfig=plane.admin_kubeconfig).stdout
    assert "up to 540 s" in notes and "--timeout 10m" in notes, notes
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    run_cronjob(plane, api, tmp_path, "after-1")
    assert api.replicas("Deployment", ns, "web") == 0

    env = {**os.environ, "KUBECONFIG": str(plane.admin_kubeconfig),
           "PATH": f"{Path(kubectl()).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", documented_release_in_the_cluster()], env=env, check=True, capture_output=True)
    job = api.get("Job", "nsscaler-release-manual", NAMESPACE)
    released = run_pod_command(plane, job["spec"]["template"]["spec"], NAMESPACE, tmp_path)

    assert released.returncode == 0, released.stderr
    assert api.replicas("Deployment", ns, "web") == 3
    cron = api.get("CronJob", "nsscaler", NAMESPACE)
    assert cron["spec"]["suspend"] is True and ANNOTATION_RELEASED in cron["metadata"]["annotations"]

    # a run from the CronJob's template after the release (by hand here; the waker's is the same Job)
    subprocess.run([kubectl(), "--kubeconfig", str(plane.admin_kubeconfig), "-n", NAMESPACE, "create", "job",
                    "--from=cronjob/nsscaler", "after-2"], check=True, capture_output=True)
    later = run_pod_command(plane, api.get("Job", "after-2", NAMESPACE)["spec"]["template"]["spec"], NAMESPACE,
                            tmp_path)
    assert later.returncode == 2, later.stderr
    assert "freezes nothing" in later.stderr
    assert api.replicas("Deployment", ns, "web") == 3, "nothing frozen again"

    result, runs = uninstall(helm, plane, api, tmp_path)
    assert result.returncode == 0, result.stderr
    assert [r.returncode for r in runs] == [0], [r.stderr for r in runs]
    assert api.replicas("Deployment", ns, "web") == 3
    nothing_installed_left(helm, plane, api)


#: OpenShift's restricted SCC: no user or group named (it assigns one from the namespace's range), a read-only root
#: filesystem; and the platform's own name for the cluster-wide objects and the ServiceAccount, which every binding
#: and policy about the runs must follow
OPENSHIFT = {"podSecurityContext": {"runAsUser": None, "runAsGroup": None},
             "securityContext": {"readOnlyRootFilesystem": True}, "fullnameOverride": "platform-nsscaler"}
#: a user from the range OpenShift assigns, in group 0 as OpenShift runs it (as root the test runs as this user;
#: otherwise as the test's own user, just as arbitrary)
ARBITRARY_UID = 1000680000


def test_an_openshift_style_install_freezes_and_restores(helm, plane, plane_api, tmp_path):
    """The runs of an install that names no user, under its renamed ServiceAccount and ClusterRoles, as an arbitrary
    user: a freeze and a restore; the admission policy that limits a run's writes still applies to that account;
    and the uninstall gives everything back."""
    api, prefix = plane_api, "shift-"
    install(helm, plane, tmp_path, OPENSHIFT)
    wait_until(api.crd_established, what="the chart's CRD")
    pod = api.get("CronJob", "nsscaler", NAMESPACE)["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert not {"runAsUser", "runAsGroup"} & set(pod["securityContext"]), pod["securityContext"]
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["serviceAccountName"] == "platform-nsscaler"
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    uid = ARBITRARY_UID if os.geteuid() == 0 else None
    run_cronjob(plane, api, tmp_path, "shift-1", uid=uid)
    assert api.replicas("Deployment", ns, "web") == 0

    # the renamed account is still nsscaler's to the admission policy: a write no run makes is refused
    account = plane.service_account_kubeconfig(tmp_path / "platform.kubeconfig", NAMESPACE, "platform-nsscaler")
    # (an admission policy takes effect when the API server has loaded and compiled it, which under load can be
    # after the first run: each try writes another value, and the policy must refuse one within the wait)
    tries: list[subprocess.CompletedProcess[str]] = []

    def refused() -> bool:
        tries.append(subprocess.run([kubectl(), "--kubeconfig", str(account), "-n", ns, "annotate", "--overwrite",
                                     "deployment", "web", f"example.com/not-nsscalers={len(tries)}"],
                                    capture_output=True, text=True, check=False))
        return tries[-1].returncode != 0

    wait_until(refused, timeout=60, what="the renamed account's foreign annotation refused")
    assert "nsscaler may change only spec.replicas" in tries[-1].stderr, tries[-1].stderr

    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v1", "v2"]}})
    run_cronjob(plane, api, tmp_path, "shift-2", uid=uid)
    assert api.replicas("Deployment", ns, "web") == 3

    api.patch("NSScaler", f"{prefix}p", {"spec": {"active_namespace_suffixes": ["v2"]}})
    run_cronjob(plane, api, tmp_path, "shift-3", uid=uid)
    assert api.replicas("Deployment", ns, "web") == 0
    result, runs = uninstall(helm, plane, api, tmp_path)
    assert result.returncode == 0, result.stderr
    assert [r.returncode for r in runs] == [0], [r.stderr for r in runs]
    assert api.replicas("Deployment", ns, "web") == 3
    nothing_installed_left(helm, plane, api)
    assert not api.exists("ServiceAccount", "platform-nsscaler", NAMESPACE)
    assert not api.exists("ClusterRoleBinding", "platform-nsscaler")


def test_an_uninstall_whose_release_cannot_finish_fails_loudly_and_removes_nothing(helm, plane, plane_api, tmp_path):
    api, prefix = plane_api, "stuck-"
    install(helm, plane, tmp_path, {})
    wait_until(api.crd_established, what="the chart's CRD")
    ns = f"{prefix}v1"
    for n in (ns, f"{prefix}v2"):
        api.create(builders.namespace(n))
    api.create(builders.deployment(ns, "web", 3))
    api.create(builders.nsscaler(f"{prefix}p", prefix, ["v2"]))
    run_cronjob(plane, api, tmp_path, "stuck-1")
    api.patch("Deployment", "web", {"metadata": {"annotations": {ANNOTATION_EXCLUDE: "true"}}}, namespace=ns)

    result, runs = uninstall(helm, plane, api, tmp_path)

    assert result.returncode != 0
    # helm names the hook Job that failed; it stays (deleted only on success), so its log says what is left
    assert "Job/nsscaler/nsscaler-release" in result.stderr and "Failed" in result.stderr, result.stderr
    assert api.exists("Job", "nsscaler-release", NAMESPACE)
    assert runs and all(r.returncode == 1 for r in runs)
    assert f"left frozen: deployment/web in {ns}" in runs[0].stderr
    assert api.exists("CronJob", "nsscaler", NAMESPACE), "nothing is removed while something is held"
    assert api.get("Deployment", "web", ns)["spec"]["replicas"] == 0
