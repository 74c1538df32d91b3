"""The chart's `values.schema.json`: every value, its type and its form, so a wrong value fails `helm install`
with a message naming it (helm validates values against this before rendering anything)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: five cron fields (minute hour day-of-month month day-of-week), or a macro such as @hourly
CRON = (r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|"
        r"(\S+\s+){4}\S+)$")
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei|e[0-9]+)?$"


def _switch(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "description": description,
            "properties": {"enabled": {"type": "boolean"}, **more}, "required": ["enabled"]}


def _object_of(description: str) -> dict[str, Any]:
    return {"type": "object", "description": description}


def _resources() -> dict[str, Any]:
    amounts = {"type": "object", "additionalProperties": {
        "anyOf": [{"type": "string", "pattern": QUANTITY}, {"type": "number", "minimum": 0}]}}
    return {"type": "object", "additionalProperties": False, "description": "the container's requests and limits",
            "properties": {"requests": amounts, "limits": amounts, "claims": {"type": "array"}}}


def _env() -> dict[str, Any]:
    return {"type": "array", "description": "more environment variables (NSSCALER_* settings)", "items": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}}}


NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
LABEL_VALUE = {"type": "string", "maxLength": 63, "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}


def _labels(description: str) -> dict[str, Any]:
    return {"type": "object", "description": description, "additionalProperties": LABEL_VALUE}


def _security_context(description: str) -> dict[str, Any]:
    """A security context: any field Kubernetes has; the user and group may be null (OpenShift assigns them)."""
    ids = {"type": ["integer", "null"], "minimum": 0}
    return {"type": "object", "description": description, "properties": {
        "runAsUser": ids, "runAsGroup": ids, "fsGroup": ids, "runAsNonRoot": {"type": ["boolean", "null"]},
        "readOnlyRootFilesystem": {"type": ["boolean", "null"]},
        "allowPrivilegeEscalation": {"type": ["boolean", "null"]}}}


def _count(description: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": 0, "description": description}


def _metrics(description: str) -> dict[str, Any]:
    return _switch(description, prometheusRule={
        "type": "object", "additionalProperties": False, "properties": {
            "namespace": {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$", "maxLength": 63},
            "labels": _labels("labels your Prometheus' ruleSelector asks for")}},
        kubeStateMetrics={"type": "object", "additionalProperties": False, "properties": {
            "namespace": {"type": "string", "pattern": NAME, "maxLength": 63},
            "serviceAccount": {"type": "string", "pattern": NAME, "maxLength": 253}}},
        noRecentRunSeconds=_count("seconds without a run before NSScalerNoRecentRun; 0: three schedule gaps"),
        runbookBaseUrl={"type": "string", "pattern": r"^https?://\S+$"},
        runbookSuffix={"type": "string", "pattern": r"^\S*$"})


def _waker(description: str) -> dict[str, Any]:
    return _switch(description, replicas={"type": "integer", "minimum": 1}, resources=_resources(),
                   nodeSelector={"type": "object", "additionalProperties": {"type": "string"}},
                   tolerations={"type": "array", "items": {"type": "object"}},
                   affinity=_object_of("the waker Pods' affinity"),
                   gatewayNamespaceLabels=_labels("labels of the namespaces whose Pods may reach the waker; "
                                                  "empty: nsscaler.wubw.fun/gateway=true"),
                   podMonitor={"type": "object", "additionalProperties": False, "required": ["enabled"],
                               "properties": {"enabled": {"type": "boolean"},
                                              "labels": _labels("labels your podMonitorSelector asks for"),
                                              "interval": {"type": "string", "pattern": r"^([0-9]+(ms|s|m|h))*$"}}})


def schema(components: Mapping[str, Path]) -> dict[str, Any]:
    """`components`: each switch of a kustomize component the chart offers, and its folder."""
    special = {"metrics": _metrics, "waker": _waker}
    switches = {key: special.get(key, _switch)(f"the {folder.name} component of kustomize/components (its objects)")
                for key, folder in components.items()}
    return {
        "$schema": "https://json-schema.org/draft-07/schema#",
        "type": "object", "additionalProperties": False,
        "properties": {
            "namespace": {"type": "object", "additionalProperties": False, "properties": {
                "name": {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$", "maxLength": 63,
                         "description": "another namespace for the chart's objects; empty: the release's"},
                "create": {"type": "boolean",
                           "description": "create namespace.name (never the release's namespace)"}}},
            "nameOverride": {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$", "maxLength": 40,
                             "description": "the cluster-wide objects and the ServiceAccount: <release>-<this>"},
            "fullnameOverride": {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$",
                                 "maxLength": 63, "description": "their name, whole"},
            "commonLabels": _labels("labels added to every object"),
            "serviceAccount": {"type": "object", "additionalProperties": False, "properties": {
                "create": {"type": "boolean"},
                "name": {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$", "maxLength": 253,
                         "description": "the runs' ServiceAccount; empty: nsscaler"},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "successfulJobsHistoryLimit": _count("finished Jobs of successful runs kept"),
            "failedJobsHistoryLimit": _count("finished Jobs of failed runs kept"),
            "startingDeadlineSeconds": _count("seconds after its time a run may still start"),
            "backoffLimit": _count("retries of a failed run's Pod"),
            "ttlSecondsAfterFinished": _count("seconds a finished Job is kept"),
            "podSecurityContext": _security_context("the Pod security context of the job's and the waker's Pods"),
            "securityContext": _security_context("the security context of their containers"),
            "image": {"type": "object", "additionalProperties": False, "properties": {
                "repository": {"type": "string", "pattern": r"^([^\s:@]+(:[0-9]+)?(/[^\s:@]+)*)?$",
                               "description": "required: the image without tag (empty fails the install, naming "
                                              "this value)"},
                "tag": {"type": "string", "pattern": r"^([\w][\w.-]{0,127})?$"},
                "digest": {"type": "string", "pattern": r"^(sha256:[a-f0-9]{64})?$"},
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                "pullSecrets": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "minLength": 1}}}}}},
            "schedule": {"type": "string", "pattern": CRON,
                         "description": "when the CronJob runs: five cron fields, e.g. \"*/10 * * * *\""},
            "timeZone": {"type": "string", "minLength": 1, "description": "an IANA time zone, e.g. Europe/Berlin"},
            "suspend": {"type": "boolean", "description": "suspend the CronJob (no run starts)"},
            "resources": _resources(),
            "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "tolerations": {"type": "array", "items": {"type": "object"}},
            "affinity": _object_of("the Pod's affinity"),
            "topologySpreadConstraints": {"type": "array", "items": {"type": "object"}},
            "podLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "podAnnotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "priorityClass": _switch("the PriorityClass nsscaler, and the CronJob's priorityClassName",
                                     existingName={"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$",
                                                   "description": "an existing PriorityClass to use instead"}),
            "flowSchema": _switch("the FlowSchema and PriorityLevelConfiguration nsscaler"),
            "wake": _switch("the Wake CRD, its admission policies and its RBAC"),
            **switches,
            "dryRun": {"type": "boolean", "description": "every PATCH with dryRun=All: nothing changes"},
            "extraArgs": {"type": "array", "items": {"type": "string"}},
            "extraEnv": _env(),
            "crds": {"type": "object", "additionalProperties": False, "properties": {
                "install": {"type": "boolean"},
                "keep": {"type": "boolean", "description": "keep the CRDs (and so every NSScaler) on uninstall"}}},
            "release": {"type": "object", "additionalProperties": False, "properties": {
                "onUninstall": {"type": "boolean",
                                "description": "helm uninstall first runs nsscaler release (gives everything back)"},
                "tierWait": {"type": "integer", "minimum": 0, "maximum": 50,
                             "description": "seconds the release waits at most per restore tier"}}},
        },
    }
