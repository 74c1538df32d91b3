"""The built-in kinds as rows of data (`BUILTIN_DATA`): the one place that names them and states their facts.

Each row says where its kind lives (`group`, `version`, `plural`), how it is frozen (`freeze.method`), and the
facts the run needs about it besides:
- `scale`: its replica field (`spec.replicas`) set to 0, the count before recorded (as a catalogue row's `scale`);
- `suspend`: `spec.suspend: true`, the flag before recorded (a built-in-only method);
- `nodeSelector`: its Pod template's node selector given a node label no node carries, the selector before
  recorded as JSON (a built-in-only method: a DaemonSet has no replica count);
- `guard`: a field the freeze sets in the same write so that it deletes nothing (`claimsKept`: a StatefulSet's
  claims kept whatever its retention policy says);
- `pods`: where one unit's Pods are (`template`: one Pod of `spec.template` per replica; `jobTemplate`: none of
  its own, its Jobs are counted as Jobs; `parallelism`: `spec.parallelism` Pods of `spec.template`);
- `finishes`: an object that finished (Complete or Failed) is not running and never touched;
- `ownerSelects`: selecting one of these kinds also freezes the objects of this kind they control;
- `freezesControlled`: frozen even under a controller (a suspended CronJob does not stop the Job it started);
- `followed`: LISTed by the Pod census to follow owner chains;
- `tier`: `app` or `data` (given back first), as for a catalogue row.

The rows are validated by `job.model.kinds.rows.BuiltinRow` (the catalogue's schema, with the two built-in
methods and the facts above) and become handlers in `job.model.kinds.registry`; everything else that names the
built-in kinds derives from this list or is checked against it by a test naming the file to change
(tests/unit/test_kinds.py). Plain data, so that `job.model.kinds.kind` can take the names from it.
"""

from __future__ import annotations

from typing import Any

BUILTIN_DATA: list[dict[str, Any]] = [
    {"kind": "Deployment", "group": "apps", "version": "v1", "plural": "deployments",
     "freeze": {"method": "scale"}, "followed": True},
    {"kind": "StatefulSet", "group": "apps", "version": "v1", "plural": "statefulsets",
     "freeze": {"method": "scale"}, "guard": "claimsKept", "followed": True},
    {"kind": "ReplicaSet", "group": "apps", "version": "v1", "plural": "replicasets",
     "freeze": {"method": "scale"}, "followed": True},
    {"kind": "ReplicationController", "group": "", "version": "v1", "plural": "replicationcontrollers",
     "freeze": {"method": "scale"},
     "note": "not followed: a run that freezes them reads them whole already, and seeds the census with them"},
    {"kind": "CronJob", "group": "batch", "version": "v1", "plural": "cronjobs",
     "freeze": {"method": "suspend"}, "pods": "jobTemplate", "followed": True},
    {"kind": "Job", "group": "batch", "version": "v1", "plural": "jobs",
     "freeze": {"method": "suspend"}, "pods": "parallelism", "finishes": True,
     "ownerSelects": ["CronJob"], "freezesControlled": True, "followed": True,
     "note": "a suspended CronJob does not stop the Job it already started: selecting CronJob selects its Jobs"},
    {"kind": "DaemonSet", "group": "apps", "version": "v1", "plural": "daemonsets",
     "freeze": {"method": "nodeSelector"}, "followed": True,
     "note": "no replica count: frozen by a node selector no node matches"},
]

#: The built-in kinds by name, in the rows' order: what `spec.kinds` accepts bare (`job.model.kinds.kind`).
BUILTIN_NAMES: tuple[str, ...] = tuple(str(row["kind"]) for row in BUILTIN_DATA)
