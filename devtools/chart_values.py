"""The chart's `values.yaml`, every value with the comment that explains it (what `helm show values` prints), and
the chart's README, generated from those comments.

Defaults that kustomize also writes (the schedule, resources, security contexts, history limits, the waker's size)
are read from the objects `kubectl kustomize` builds, so the chart's defaults render prod's objects.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

from devtools.chart_platform import CRONJOB_FIELDS, JOB_FIELDS, RUNBOOK_BASE_URL
from devtools.cluster.versions import SUPPORTED
from job import REPOSITORY, __version__

Obj = dict[str, Any]
#: a key that holds the documented keys under it
GROUP = object()
Entry = tuple[str, Any, str]


def kube_version() -> str:
    """The supported minors (devtools/cluster/versions.py), as Helm's constraint: the oldest to the newest."""
    minors = sorted(SUPPORTED, key=lambda m: tuple(map(int, m.split("."))))
    return f">={minors[0]}.0-0 <{minors[-1].split('.')[0]}.{int(minors[-1].split('.')[1]) + 1}.0-0"


def chart_yaml() -> dict[str, Any]:
    return {"apiVersion": "v2", "name": "nsscaler", "version": __version__, "appVersion": __version__,
            "type": "application", "kubeVersion": kube_version(), "home": REPOSITORY,
            "sources": [REPOSITORY],
            "description": "Freeze namespace families to zero replicas and restore them exactly (a CronJob batch "
                           "reconciler)"}


#: what each component of devtools.chart's COMPONENTS adds, in values.yaml's words (in its order)
COMPONENT_HELP = {
    "metrics": "The metrics component: kube-state-metrics' config for the policies' status, the alert rules, a "
               "dashboard.",
    "wakeRequesterStamp": "Kubernetes 1.36 and later: the API server fills in a Wake's spec.requestedBy.",
    "waker": "The waker, for wake on request: its Deployment, Service, PodDisruptionBudget, NetworkPolicy, RBAC and "
             "admission policy, and the job's rights on HTTPRoutes.",
    "operatorKinds": "The RBAC of the shipped catalogue of operator kinds (CNPG, Zalando, Percona, RabbitMQ, "
                     "Strimzi).",
    "gitopsSyncs": "Count the GitOps syncs the hold refused: list (read only) on Flux's Kustomizations and "
                   "HelmReleases and Argo CD's Applications, and the run's --gitops-syncs.",
}


def value_entries(prod: list[Obj], components: dict[str, list[Obj]]) -> list[Entry]:
    """Every value, its defaults read from prod's objects and the components' (`components`: switch -> objects)."""
    cronjob = next(o for o in prod if o["kind"] == "CronJob")
    waker = next(o for o in components["waker"] if o["kind"] == "Deployment")
    policy = next(o for o in components["waker"] if o["kind"] == "NetworkPolicy")
    (gateway,) = [p["namespaceSelector"]["matchLabels"] for r in policy["spec"]["ingress"] for p in r["from"]
                  if "namespaceSelector" in p]
    return entries(cronjob, waker, gateway, components=COMPONENT_HELP)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _pod(o: Obj) -> Obj:
    return o["spec"]["jobTemplate"]["spec"]["template"] if o["kind"] == "CronJob" else o["spec"]["template"]


def entries(cronjob: Obj, waker: Obj, gateway_labels: dict[str, str], *, components: dict[str, str]) -> list[Entry]:
    """Every value: its dotted path, its default (or GROUP) and what it does. `waker`: the waker's Deployment,
    `gateway_labels`: what its NetworkPolicy asks of the gateway's namespace; `components`: switch -> what it adds."""
    pod = _pod(cronjob)["spec"]
    container = pod["containers"][0]
    waker_pod = waker["spec"]["template"]["spec"]
    if waker_pod["securityContext"] != pod["securityContext"]:
        raise SystemExit("the waker's and the CronJob's Pod security contexts differ in kustomize: the chart has one "
                         "podSecurityContext for both")
    job = cronjob["spec"]["jobTemplate"]["spec"]
    cron_help = {
        "successfulJobsHistoryLimit": "finished Jobs of successful runs kept (their logs with them)",
        "failedJobsHistoryLimit": "finished Jobs of failed runs kept",
        "startingDeadlineSeconds": "a run that could not start this many seconds after its time is skipped",
        "backoffLimit": "retries of a failed run's Pod (exit 2, bad settings or RBAC, is never retried)",
        "ttlSecondsAfterFinished": "seconds a finished Job (and its Pod's log) is kept at most"}
    out: list[Entry] = [
        ("image", GROUP, "The nsscaler image, for the CronJob, the uninstall's release Job and the waker."),
        ("image.repository", "", "Required: the image without tag, e.g. registry.example.com/platform/nsscaler "
                                 "(the install fails with a message saying so when it is empty)."),
        ("image.tag", "", "The tag; empty: the chart's appVersion."),
        ("image.digest", "", "sha256:...; when set the image is repository@digest and the tag is not used."),
        ("image.pullPolicy", container["imagePullPolicy"], "Always, IfNotPresent or Never."),
        ("image.pullSecrets", [], "Secrets to pull the image with, e.g. [{name: regcred}]."),
        ("namespace", GROUP, "Where the chart's objects go: by default the release's namespace "
                             "(helm install -n nsscaler --create-namespace)."),
        ("namespace.name", "", "Another namespace for them; empty: the release's."),
        ("namespace.create", False, "Create namespace.name (labelled Pod Security restricted) and delete it on "
                                    "uninstall. Never the release's own namespace: that holds Helm's record of "
                                    "the release, and the install fails if you ask for it."),
        ("nameOverride", "", "The cluster-wide objects (ClusterRoles and their bindings, admission policies, the "
                             "FlowSchema, the PriorityClass) and the ServiceAccount are named <release>-<this> "
                             "instead of nsscaler (their suffixes stay). The namespaced objects keep their names: "
                             "nsscaler's code and policies know them (the CronJob nsscaler, the Lease nsscaler-run, "
                             "the Service nsscaler-waker)."),
        ("fullnameOverride", "", "As nameOverride, the name given whole."),
        ("commonLabels", {}, "Labels added to every object the chart installs (not the chart's own keys, "
                             "app.kubernetes.io/name and app.kubernetes.io/part-of)."),
        ("serviceAccount", GROUP, "The ServiceAccount the runs use; the RBAC bindings, the FlowSchema and the "
                                  "admission policy that limits what a run may write all name it."),
        ("serviceAccount.create", True, "Create it; false: it must exist already."),
        ("serviceAccount.name", "", "Its name; empty: nsscaler (or the full name of nameOverride)."),
        ("serviceAccount.annotations", {}, "Annotations on it (e.g. a cloud identity)."),
        ("schedule", cronjob["spec"]["schedule"], "When the CronJob runs: five cron fields or a macro (@hourly)."),
        ("timeZone", cronjob["spec"]["timeZone"], "The schedule's IANA time zone."),
        ("suspend", False, "Suspend the CronJob: no run starts."),
        *[(f, cronjob["spec"][f], _sentence(cron_help[f])) for f in CRONJOB_FIELDS],
        *[(f, job[f], _sentence(cron_help[f])) for f in JOB_FIELDS],
        ("resources", container["resources"], "The job container's requests and limits."),
        ("podSecurityContext", pod["securityContext"],
         "The Pod security context of the job's and the waker's Pods. OpenShift's restricted SCC assigns the "
         "user: set runAsUser and runAsGroup to null there."),
        ("securityContext", container["securityContext"], "The security context of their containers."),
        ("nodeSelector", {}, "Where the job's Pods may run."),
        ("tolerations", [], "Tolerations of the job's Pods."),
        ("affinity", {}, "Affinity of the job's Pods."),
        ("topologySpreadConstraints", [], "Spread constraints of the job's Pods."),
        ("podLabels", {}, "Labels added to the job's Pods."),
        ("podAnnotations", {}, "Annotations added to the job's Pods."),
        ("priorityClass", GROUP, "The job Pods' priority."),
        ("priorityClass.enabled", True, "Create the PriorityClass nsscaler (or the full name) and use it."),
        ("priorityClass.existingName", "", "Use this existing PriorityClass instead (nothing is created)."),
        ("flowSchema", GROUP, "API Priority and Fairness for the runs' requests."),
        ("flowSchema.enabled", True, "The FlowSchema and PriorityLevelConfiguration nsscaler."),
        ("wake", GROUP, "Wakes: asking for a held namespace to run for a while."),
        ("wake.enabled", True, "The Wake CRD, its admission policies and its RBAC."),
    ]
    for key, what in components.items():
        out += [(key, GROUP, what), (f"{key}.enabled", False, "Install it.")]
        if key == "metrics":
            out += [
                ("metrics.prometheusRule", GROUP, "The alert rules (a Prometheus Operator PrometheusRule)."),
                ("metrics.prometheusRule.namespace", "", "Its namespace; empty: the chart's."),
                ("metrics.prometheusRule.labels", {}, "Labels your Prometheus' ruleSelector asks for, e.g. "
                                                      "{release: kube-prometheus-stack}."),
                ("metrics.kubeStateMetrics", GROUP, "The kube-state-metrics that turns each policy's status into "
                                                    "metrics: its config goes to its namespace, its account may "
                                                    "read NSScalers."),
                ("metrics.kubeStateMetrics.namespace", "kube-system", "Its namespace (kube-prometheus-stack: the "
                                                                      "stack's, e.g. monitoring)."),
                ("metrics.kubeStateMetrics.serviceAccount", "kube-state-metrics",
                 "Its ServiceAccount (kube-prometheus-stack: <release>-kube-state-metrics)."),
                ("metrics.noRecentRunSeconds", 0, "NSScalerNoRecentRun fires when no run reconciled a policy for "
                                                  "this long; 0: three times the longest gap between runs of "
                                                  "schedule."),
                ("metrics.runbookBaseUrl", RUNBOOK_BASE_URL, "Where the runbooks are; each alert's runbook_url is "
                                                             "<runbookBaseUrl>/<alert page><runbookSuffix>."),
                ("metrics.runbookSuffix", ".md", "The runbook pages' suffix (.html for a site built by make docs)."),
            ]
        if key == "waker":
            out += [
                ("waker.replicas", waker["spec"]["replicas"], "Waker Pods (a PodDisruptionBudget keeps one)."),
                ("waker.resources", waker_pod["containers"][0]["resources"], "The waker container's resources."),
                ("waker.nodeSelector", {}, "Where the waker's Pods may run."),
                ("waker.tolerations", [], "Tolerations of the waker's Pods."),
                ("waker.affinity", {}, "Affinity of the waker's Pods."),
                ("waker.gatewayNamespaceLabels", {},
                 "The labels of the namespaces whose Pods (the gateway's) may reach the waker (its NetworkPolicy); "
                 "empty: " + ", ".join(f"{k}={v}" for k, v in gateway_labels.items()) + "."),
                ("waker.podMonitor", GROUP, "A Prometheus Operator PodMonitor for the waker's /metrics."),
                ("waker.podMonitor.enabled", False, "Create it."),
                ("waker.podMonitor.labels", {}, "Labels your Prometheus' podMonitorSelector asks for."),
                ("waker.podMonitor.interval", "", "Scrape interval, e.g. 30s; empty: Prometheus' own."),
            ]
    out += [
        ("dryRun", False, "Every change of a run is sent with dryRun=All: nothing changes, the plan is logged "
                          "(never the release's: a release is never a dry run)."),
        ("extraArgs", [], "More flags for nsscaler, e.g. [--max-freeze=500]."),
        ("extraEnv", [], "More environment variables (NSSCALER_* settings)."),
        ("kindRows", [], "A platform team's kinds as rows: each entry (name, spec: the row) renders one "
                         "NSScalerKind (docs/operating/custom-kinds.md)."),
        ("kindRowsAccess", True, "Beside each of kindRows, the ClusterRole its kind needs (list, get, patch), "
                                 "labelled to aggregate into nsscaler's own."),
        ("crds", GROUP, "The NSScaler, NSScalerKind and Wake CRDs."),
        ("crds.install", True, "Install them."),
        ("crds.keep", True, "Keep them, and so every NSScaler, on helm uninstall."),
        ("release", GROUP, "What helm uninstall does first."),
        ("release.onUninstall", True, "Run nsscaler release: the CronJob suspended for good, then every workload "
                                      "given back, or the uninstall fails."),
        ("release.tierWait", 30, "Seconds the release waits at most for each restore tier."),
    ]
    return out


def render(found: list[Entry], header: str) -> str:
    """values.yaml: each value under its comment, in the order given."""
    lines = [header.rstrip("\n"), f"# nsscaler's chart: {REPOSITORY}. Every value is checked by values.schema.json.",
             "# `helm show values` prints this file; the chart's README.md is generated from these comments."]
    for path, default, comment in found:
        depth = path.count(".")
        indent = "  " * depth
        key = path.rsplit(".", 1)[-1]
        if depth == 0:
            lines.append("")
        lines += [f"{indent}# {line}" for line in textwrap.wrap(comment, 110 - len(indent), break_on_hyphens=False)]
        if default is GROUP:
            lines.append(f"{indent}{key}:")
            continue
        dumped = yaml.safe_dump({key: default}, sort_keys=False, width=1000, default_flow_style=False).rstrip("\n")
        lines += [f"{indent}{line}" for line in dumped.splitlines()]
    return "\n".join(lines) + "\n"


def defaults(found: list[Entry]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, default, _ in found:
        *parents, key = path.split(".")
        node = out
        for p in parents:
            node = node[p]
        node[key] = {} if default is GROUP else default
    return out


_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][\w.-]*):(?P<rest>.*)$")


def documented(values_yaml: str) -> list[tuple[str, str, bool]]:
    """(path, comment, is a group) of every key under a comment in values.yaml, in order."""
    out: list[tuple[str, str, bool]] = []
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    lines = values_yaml.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        m = _KEY.match(line)
        if not m or not comment:
            comment = []
            continue
        depth = len(m["indent"])
        stack = [(d, k) for d, k in stack if d < depth] + [(depth, m["key"])]
        nxt = next((n for n in lines[i + 1:] if n.strip()), "")
        group = not m["rest"].strip() and nxt.strip().startswith("#") and len(nxt) - len(nxt.lstrip()) > depth
        out.append((".".join(k for _, k in stack), " ".join(comment), group))
        comment = []
    return out


def _get(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for part in path.split("."):
        node = node[part]
    return node


def readme(values_yaml: str, chart: dict[str, Any]) -> str:
    """The chart's README.md, from values.yaml's comments."""
    values = yaml.safe_load(values_yaml)
    rows = []
    for path, comment, group in documented(values_yaml):
        shown = "" if group else "`" + yaml.safe_dump(_get(values, path), default_flow_style=True,
                                                      width=1000).strip().removesuffix("...").strip() + "`"
        name = f"**`{path}`**" if group else f"`{path}`"
        rows.append(f"| {name} | {shown.replace('|', '&#124;')} | {comment.replace('|', '&#124;')} |")
    return "\n".join([
        "<!-- Generated by `make chart` from values.yaml's comments (devtools/chart_values.py): edit those, "
        "not this file. -->",
        f"# nsscaler {chart['version']}", "", chart["description"], "",
        f"Source: <{chart['home']}>. Kubernetes {chart['kubeVersion']}.", "",
        "```sh",
        "helm install nss charts/nsscaler -n nsscaler --create-namespace \\",
        "  --set image.repository=registry.example.com/platform/nsscaler",
        "helm uninstall nss -n nsscaler --wait --timeout 10m   # gives every held workload back first",
        "```", "",
        "The chart's objects go to the release's namespace. It installs no NSScaler: write one "
        "(samples: kustomize/samples/ in the repository).", "",
        "## Values", "",
        "| value | default | meaning |", "|---|---|---|", *rows, ""])


def main(argv: list[str] | None = None) -> int:
    """`make chart-readme`: charts/nsscaler/README.md from the chart's values.yaml; `--check` (make lint) fails
    when the README is not what values.yaml's comments say (`make chart` writes both)."""
    chart = Path(__file__).resolve().parent.parent / "charts" / "nsscaler"
    parser = argparse.ArgumentParser(description="the chart's README.md, generated from values.yaml's comments")
    parser.add_argument("--check", action="store_true", help="fail when charts/nsscaler/README.md is stale")
    args = parser.parse_args(argv)
    found = readme((chart / "values.yaml").read_text(), yaml.safe_load((chart / "Chart.yaml").read_text()))
    path = chart / "README.md"
    if args.check:
        if not path.exists() or path.read_text() != found:
            print("charts/nsscaler/README.md is not what values.yaml's comments say: run `make chart-readme`",
                  file=sys.stderr)
            return 1
        return 0
    path.write_text(found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
