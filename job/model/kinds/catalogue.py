"""The shipped catalogue: operator kinds as rows (`job.model.kinds.rows`), each freezing the operator's own way,
with where that way is documented and the operator versions it was checked against (the CRDs of those versions
are the test fixtures under tests/fixtures/crds/).

A row is active only where a policy names its kind in `spec.kinds` and the cluster serves its CRD with one of the
row's versions; a platform team's row for the same kind (`--kind-rows`) replaces it. Its RBAC is rendered into
kustomize/components/operator-kinds (`make rows`) and its line in the docs' table is checked by a test.

Not here, because they have no off switch a row can say: a Strimzi `Kafka` cluster (its brokers refuse 0
replicas by schema, and its node pools cannot scale down while brokers hold partitions). Of the kinds whose
operator must be paused before the StatefulSets it owns are scaled, RabbitMQ's is here; ECK and OT Redis are
not yet (their rows would be the same shape, with their own marker).
"""

from __future__ import annotations

from typing import Any

from job.model.kinds.rows import Row, parse_rows

_CNPG = "CloudNativePG 1.28.0"
_STRIMZI_SOURCE = "strimzi/strimzi-kafka-operator: spec.replicas accepts 0 (no minimum in the CRD's schema)"

CATALOGUE_DATA: list[dict[str, Any]] = [
    {"kind": "Cluster.postgresql.cnpg.io", "plural": "clusters", "versions": ["v1"],
     "freeze": {"method": "annotation", "key": "cnpg.io/hibernation", "value": "on"},
     "frozen": {"condition": {"type": "cnpg.io/hibernation", "status": "True", "reason": "Hibernated"},
                "within": 600},
     "precondition": {"path": "status.phase", "equals": "Cluster in healthy state"},
     "ready": {"path": "status.readyInstances", "atLeast": "spec.instances"},
     "tier": "data",
     "source": "cloudnative-pg/cloudnative-pg pkg/reconciler/hibernation/status.go and reconciler.go: the "
               "annotation sets the condition (DeletingPods, WaitingPodsDeletion, then Hibernated) only from a "
               "healthy phase or once begun, the Pods are deleted primary first and every PVC kept; `off` or no "
               "annotation removes the condition and the Pods come back on the kept PVCs",
     "checked": [_CNPG],
     "note": "its /scale subresource refuses 0 instances, so the annotation is the only way down"},
    {"kind": "Pooler.postgresql.cnpg.io", "plural": "poolers", "versions": ["v1"], "freeze": {"method": "scale"},
     "tier": "data",
     "source": "cloudnative-pg/cloudnative-pg api/v1/pooler_types.go: spec.instances has no minimum",
     "checked": [_CNPG]},
    {"kind": "postgresql.acid.zalan.do", "plural": "postgresqls", "versions": ["v1"],
     "freeze": {"method": "field", "path": "spec.numberOfInstances", "value": 0},
     "tier": "data",
     "source": "zalando/postgres-operator: numberOfInstances 0 scales its StatefulSet to 0 and keeps the volumes",
     "checked": ["postgres-operator 1.15.1"]},
    {"kind": "PerconaXtraDBCluster.pxc.percona.com", "plural": "perconaxtradbclusters", "versions": ["v1"],
     "freeze": {"method": "field", "path": "spec.pause", "value": True},
     "tier": "data",
     "source": "percona/k8spxc-docs docs/pause.md: spec.pause true stops the cluster, its data kept",
     "checked": ["percona-xtradb-cluster-operator 1.18.0"]},
    {"kind": "RabbitmqCluster.rabbitmq.com", "plural": "rabbitmqclusters", "versions": ["v1beta1"],
     "freeze": {"method": "pause", "marker": "label", "key": "rabbitmq.com/pauseReconciliation", "value": "true"},
     "tier": "data",
     "source": "rabbitmq/cluster-operator internal/controller/rabbitmqcluster_controller.go: the label "
               "rabbitmq.com/pauseReconciliation=true stops its reconciling (kubectl rabbitmq pause-reconciliation "
               "sets it), so the StatefulSet it owns stays at the replicas nsscaler sets; the PVCs are kept",
     "checked": ["RabbitMQ cluster operator 2.22.3"],
     "note": "the operator's pause is a label, not an annotation"},
    {"kind": "KafkaConnect.kafka.strimzi.io", "plural": "kafkaconnects", "versions": ["v1"],
     "freeze": {"method": "scale"},
     "source": _STRIMZI_SOURCE, "checked": ["Strimzi 1.2.0"]},
    {"kind": "KafkaMirrorMaker2.kafka.strimzi.io", "plural": "kafkamirrormaker2s", "versions": ["v1"],
     "freeze": {"method": "scale"},
     "source": _STRIMZI_SOURCE, "checked": ["Strimzi 1.2.0"]},
    {"kind": "KafkaBridge.kafka.strimzi.io", "plural": "kafkabridges", "versions": ["v1"],
     "freeze": {"method": "scale"},
     "source": _STRIMZI_SOURCE, "checked": ["Strimzi 1.2.0"]},
]


def _catalogue() -> tuple[Row, ...]:
    rows, problems = parse_rows(CATALOGUE_DATA, origin="the shipped catalogue")
    if problems:  # a test keeps this from ever shipping
        raise ValueError("; ".join(problems))
    return tuple(rows)


#: the shipped rows, validated once at import like any row
CATALOGUE: tuple[Row, ...] = _catalogue()
