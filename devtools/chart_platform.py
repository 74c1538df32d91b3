"""What a platform team sets on the chart, applied to the objects kustomize builds: the release's namespace, the
ServiceAccount, security contexts, common labels, the CronJob's history and deadlines, the waker's size and
placement, and monitoring that fits a stock kube-prometheus-stack.

`mark` replaces fields of an object by sentinels (`__VALUE_<NAME>__`) that `devtools.chart` turns into template
text with `replacement`; `TEXT_EDITS` template what lives inside strings (a CEL expression, an alert's
expression and runbook address), and fail the generation when kustomize no longer has the text they edit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from job import REPOSITORY, __version__

Obj = dict[str, Any]

#: the ServiceAccount kustomize names, the one the RBAC bindings, the FlowSchema and the run-admission policy name
SERVICE_ACCOUNT = "nsscaler"
#: where each alert's runbook is by default: the runbooks of this version in the repository (docs/runbooks/*.md)
RUNBOOK_BASE_URL = f"{REPOSITORY}/blob/v{__version__}/docs/runbooks"
#: the CronJob's fields a value sets (same name in values.yaml), and those of its Job
CRONJOB_FIELDS = ("successfulJobsHistoryLimit", "failedJobsHistoryLimit", "startingDeadlineSeconds")
JOB_FIELDS = ("backoffLimit", "ttlSecondsAfterFinished")
#: what the waker's NetworkPolicy asks of a gateway's namespace in kustomize, the default of
#: `waker.gatewayNamespaceLabels` (an empty map there: a map value would merge with a default, never replace it)
GATEWAY_LABELS = {"nsscaler.wubw.fun/gateway": "true"}
#: the waker's Pod fields a value sets (under `waker.`)
WAKER_POD_FIELDS = ("nodeSelector", "tolerations", "affinity")


def sentinel(name: str) -> str:
    return f"__VALUE_{name}__"


def _is_own_service_account(subject: Any) -> bool:
    return isinstance(subject, dict) and subject.get("kind") == "ServiceAccount" and (
        subject.get("name") == SERVICE_ACCOUNT or (subject.get("serviceAccount") or {}).get("name") == SERVICE_ACCOUNT)


def _service_account_refs(o: Obj) -> None:
    """Every place the job's ServiceAccount is named: the RBAC bindings' and the FlowSchema's subjects."""
    subjects = o.get("subjects") or [s for r in (o.get("spec") or {}).get("rules", []) for s in r.get("subjects", [])]
    for subject in subjects:
        if not _is_own_service_account(subject):
            continue
        if "serviceAccount" in subject:
            subject["serviceAccount"]["name"] = sentinel("SA_NAME")
        else:
            subject["name"] = sentinel("SA_NAME")


def mark_pod_security(pod_spec: Obj) -> None:
    """The Pod's and every container's security context: the values' (the same for the job and the waker)."""
    pod_spec["securityContext"] = sentinel("SECURITY_POD")
    for container in pod_spec["containers"]:
        container["securityContext"] = sentinel("SECURITY_CONTAINER")


def mark_cronjob(o: Obj) -> None:
    for field in CRONJOB_FIELDS:
        o["spec"][field] = sentinel(f"CRONJOB_{field}")
    job_spec = o["spec"]["jobTemplate"]["spec"]
    for field in JOB_FIELDS:
        job_spec[field] = sentinel(f"CRONJOB_{field}")


def _mark_waker(o: Obj) -> None:
    if o["kind"] == "Deployment":
        o["spec"]["replicas"] = sentinel("WAKER_REPLICAS")
        pod = o["spec"]["template"]["spec"]
        mark_pod_security(pod)
        pod["containers"][0]["resources"] = sentinel("WAKER_RESOURCES")
        for field in WAKER_POD_FIELDS:
            pod[field] = sentinel(f"WAKER_POD_{field}")
    if o["kind"] == "NetworkPolicy":
        for rule in o["spec"]["ingress"]:
            for peer in rule["from"]:
                if "namespaceSelector" in peer:
                    if peer["namespaceSelector"]["matchLabels"] != GATEWAY_LABELS:
                        raise SystemExit("the waker's NetworkPolicy asks the gateway's namespace for other labels "
                                         "than GATEWAY_LABELS of devtools/chart_platform.py: update it")
                    peer["namespaceSelector"]["matchLabels"] = sentinel("WAKER_GATEWAY_LABELS")


def _mark_metrics(o: Obj) -> None:
    if o["kind"] == "PrometheusRule":
        o["metadata"]["namespace"] = sentinel("RULE_NAMESPACE")
        o["metadata"]["labels"]["__rule__"] = sentinel("RULE_LABELS")
    if o["metadata"].get("namespace") == "kube-system":  # kube-state-metrics' config
        o["metadata"]["namespace"] = sentinel("KSM_NAMESPACE")
    for subject in o.get("subjects") or []:
        if subject.get("namespace") == "kube-system":
            subject["namespace"] = sentinel("KSM_NAMESPACE")
            subject["name"] = sentinel("KSM_SERVICE_ACCOUNT")


#: cluster-wide kinds whose objects nsscaler names `nsscaler` or `nsscaler-…`: named after `nsscaler.fullname`,
#: so that each release's are its own (CRDs are not: one API for every release)
CLUSTER_KINDS = ("ClusterRole", "ClusterRoleBinding", "FlowSchema", "PriorityLevelConfiguration", "PriorityClass",
                 "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
                 "MutatingAdmissionPolicyBinding")
#: stands for the release's full name in an object's name until `edit_text` templates it
FULLNAME = "__FULLNAME__"


def _full(name: str) -> str:
    return FULLNAME + name.removeprefix("nsscaler") if name == "nsscaler" or name.startswith("nsscaler-") else name


def _cluster_names(o: Obj) -> None:
    """The object's own name if it is cluster-wide, and its references to cluster-wide objects of the chart: a
    binding's ClusterRole, an admission binding's policy, a FlowSchema's priority level."""
    if o["kind"] in CLUSTER_KINDS:
        o["metadata"]["name"] = _full(o["metadata"]["name"])
    ref = o.get("roleRef")
    if ref and ref.get("kind") == "ClusterRole":
        ref["name"] = _full(ref["name"])
    spec = o.get("spec") if isinstance(o.get("spec"), dict) else {}
    if o["kind"].endswith("AdmissionPolicyBinding"):
        spec["policyName"] = _full(spec["policyName"])
    if o["kind"] == "FlowSchema":
        spec["priorityLevelConfiguration"]["name"] = _full(spec["priorityLevelConfiguration"]["name"])


def mark(o: Obj, component: str | None = None) -> Obj:
    """Every object: common labels, its references to the job's ServiceAccount and to cluster-wide objects; a
    component's own values."""
    _cluster_names(o)
    o["metadata"]["labels"] = {**o["metadata"].get("labels", {}), "__common__": sentinel("COMMON_LABELS")}
    _service_account_refs(o)
    if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == SERVICE_ACCOUNT:
        o["metadata"]["name"] = sentinel("SA_NAME")
        o["metadata"]["annotations"] = sentinel("SA_ANNOTATIONS")
    if component == "waker":
        _mark_waker(o)
    if component == "metrics":
        _mark_metrics(o)
    return o


def _block(expr: str, *, key: str, indent: str) -> str:
    """`key:` with the YAML of `expr` under it, only when it is set."""
    w = len(indent) + 2
    return (f"{indent}{{{{- with {expr} }}}}\n{indent}{key}:\n{indent}  {{{{- toYaml . | nindent {w} }}}}\n"
            f"{indent}{{{{- end }}}}")


def _merged(expr: str, indent: str) -> str:
    """More entries of the map the line is in, from `expr`."""
    w = len(indent)
    return f"{indent}{{{{- with {expr} }}}}\n{indent}{{{{- toYaml . | nindent {w} }}}}\n{indent}{{{{- end }}}}"


def replacement(name: str, key: str, indent: str) -> str | None:
    """The template text for `key: __VALUE_name__` at `indent`, or None when the name is not one of these."""
    simple = {"SA_NAME": '{{ include "nsscaler.serviceAccountName" . }}',
              "WAKER_REPLICAS": "{{ .Values.waker.replicas }}",
              "RULE_NAMESPACE": ("{{ .Values.metrics.prometheusRule.namespace"
                                 ' | default (include "nsscaler.namespace" .) }}'),
              "KSM_NAMESPACE": "{{ .Values.metrics.kubeStateMetrics.namespace }}",
              "KSM_SERVICE_ACCOUNT": "{{ .Values.metrics.kubeStateMetrics.serviceAccount }}",
              **{f"CRONJOB_{f}": f"{{{{ .Values.{f} }}}}" for f in (*CRONJOB_FIELDS, *JOB_FIELDS)}}
    if name in simple:
        return f"{indent}{key}: {simple[name]}"
    if name == "COMMON_LABELS":
        return _merged(".Values.commonLabels", indent)
    if name == "RULE_LABELS":
        return _merged(".Values.metrics.prometheusRule.labels", indent)
    blocks = {"SA_ANNOTATIONS": ".Values.serviceAccount.annotations",
              "SECURITY_POD": ".Values.podSecurityContext",
              "SECURITY_CONTAINER": ".Values.securityContext",
              **{f"WAKER_POD_{f}": f".Values.waker.{f}" for f in WAKER_POD_FIELDS}}
    if name in blocks:
        return _block(blocks[name], key=key, indent=indent)
    if name == "WAKER_GATEWAY_LABELS":
        default = " ".join(f'"{k}" "{v}"' for k, v in GATEWAY_LABELS.items())
        chosen = f"(.Values.waker.gatewayNamespaceLabels | default (dict {default}))"
        return f"{indent}{key}:\n{indent}  {{{{- toYaml {chosen} | nindent {len(indent) + 2} }}}}"
    if name == "WAKER_RESOURCES":
        w = len(indent) + 2
        return f"{indent}{key}:\n{indent}  {{{{- toYaml .Values.waker.resources | nindent {w} }}}}"
    return None


_RUNBOOKS = "https://nsscaler.wubw.fun/runbooks/"
_NAMESPACE = '{{ include "nsscaler.namespace" . }}'

#: (which template files, the text kustomize writes, what the chart writes instead)
TEXT_EDITS: list[tuple[Callable[[str], bool], str, str]] = [
    (lambda f: f.startswith("validatingadmissionpolicy-nsscaler-run-writes"), "endsWith(':nsscaler')",
     "endsWith(':{{ include \"nsscaler.serviceAccountName\" . }}')"),
    (lambda f: f.startswith("metrics/prometheusrule"), "or on() vector(1800)",
     'or on() vector({{ include "nsscaler.noRecentRunSeconds" . }})'),
    (lambda f: f.startswith("metrics/prometheusrule"), "kubectl -n nsscaler ", f"kubectl -n {_NAMESPACE} "),
    (lambda f: f.startswith("metrics/prometheusrule"), 'cronjob="nsscaler"',
     f'cronjob="nsscaler", namespace="{_NAMESPACE}"'),
]


def edit_text(name: str, text: str) -> str:
    """`TEXT_EDITS` on one template file; each runbook address moved under `metrics.runbookBaseUrl`."""
    for applies, old, new in TEXT_EDITS:
        if applies(name):
            if old not in text:
                raise SystemExit(f"{name}: kustomize no longer writes {old!r}: update TEXT_EDITS in "
                                 f"devtools/chart_platform.py")
            text = text.replace(old, new)
    text = text.replace(FULLNAME, '{{ include "nsscaler.fullname" . }}')
    if name.startswith("metrics/prometheusrule"):
        if _RUNBOOKS not in text:
            raise SystemExit(f"{name}: no runbook_url under {_RUNBOOKS}: update devtools/chart_platform.py")
        text = text.replace(_RUNBOOKS, '{{ .Values.metrics.runbookBaseUrl | trimSuffix "/" }}/')
        text = text.replace(".html\n", "{{ .Values.metrics.runbookSuffix }}\n")
    return text


#: the chart's own template helpers (namespace, ServiceAccount, PriorityClass, image repository, the alert's
#: threshold from `schedule`), added to `_helpers.tpl`
HELPERS = (Path(__file__).with_name("chart_helpers.tpl")).read_text()

POD_MONITOR = """{{- if and .Values.waker.enabled .Values.waker.podMonitor.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  labels:
    app.kubernetes.io/name: nsscaler-waker
    {{- with .Values.commonLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with .Values.waker.podMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  name: nsscaler-waker
  namespace: {{ include "nsscaler.namespace" . }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: nsscaler-waker
  podMetricsEndpoints:
  - port: http
    path: /metrics
    {{- with .Values.waker.podMonitor.interval }}
    interval: {{ . }}
    {{- end }}
{{- end }}
"""
