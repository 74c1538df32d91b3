"""What one run read of the cluster, as one immutable value: the input of every decision (`job.decide`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from job.model.autoscalers import ScaledObject
from job.model.policy import InvalidPolicy, Policy
from job.model.syncs import SyncAttempt
from job.model.wake import Wake
from job.model.workloads import Namespace, Workload

#: What a decision may ask the read stage for once it knows that the run changes something: the KEDA
#: ScaledObjects (paused and resumed with their workloads) and the HPAs (reported when they can undo a freeze).
NEED_SCALED_OBJECTS = "scaled-objects"
NEED_HPAS = "hpas"


@dataclass(frozen=True)
class Autoscalers:
    """The autoscalers a run read, or why it could not read them (the decision then says what that costs)."""

    scaled_objects: tuple[ScaledObject, ...] = ()
    hpas: tuple[Mapping[str, Any], ...] = ()
    scaled_objects_error: str | None = None
    hpas_error: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything a run decides from. `workloads` are the slim views of `job.model.workloads`, whole where a
    decision needs their size and from metadata elsewhere. `autoscalers` is None until a decision has shown
    that they matter: a run that changes nothing never reads them, so a steady state costs no request for them.
    `wakes` are read whole in one LIST: they decide the selection."""

    policies: tuple[Policy | InvalidPolicy, ...]
    namespaces: tuple[Namespace, ...]
    workloads: tuple[Workload, ...]
    autoscalers: Autoscalers | None = None
    #: every Wake in the cluster (one LIST per run; none when the Wake CRD is not installed)
    wakes: tuple[Wake, ...] = ()
    #: the Pod overhead of each RuntimeClass, when a workload read whole named one (None: not read)
    overheads: Mapping[str, Mapping[str, int]] | None = None
    #: the policies being deleted, kept by a finalizer of nsscaler's until it has given back what they hold:
    #: they hold nothing (they are not in `policies`)
    leaving: tuple[Policy | InvalidPolicy, ...] = ()
    #: why nsscaler may not read and write some custom kind a policy names (`job.cluster.read.discover`): a run
    #: serves the other policies, a release (which must give everything back) stops
    forbidden: tuple[str, ...] = ()
    #: the GitOps controllers' objects, read only where `--gitops-syncs` is on (`job.cluster.syncs`)
    syncs: tuple[SyncAttempt, ...] = ()
