"""Who scaled a frozen workload back up, and whether a GitOps tool manages it (pure, no I/O).

The API server records, per field manager, which fields each client last wrote
(`metadata.managedFields`). When a workload carrying nsscaler's record is found running again, the manager
that owns its size field (`spec.replicas`, or `spec.suspend` for a CronJob) is the one that scaled it: an
Argo CD self-heal, a Flux reconcile, Helm, a person with kubectl, an autoscaler. nsscaler freezes it again
either way; what it says depends on who it was, because the fix lives in that tool's configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from job.model.managed import ARGO_CD, FLUX, tool_of
from job.model.marks import ANNOTATION_EXCLUDE, FIELD_MANAGER

_EXCLUDE_HINT = f'annotate it {ANNOTATION_EXCLUDE}="true" if it must run while its namespace is held'


def fix(*, tool_name: str | None, kind: str, group: str, pointer: str, manager: str | None) -> str:
    """The one configuration change that ends the fight, in the words of the tool that fights."""
    if tool_name == ARGO_CD:
        quoted = group or '""'
        return (f"in its Argo CD Application set ignoreDifferences [{{group: {quoted}, kind: {kind}, "
                f"managedFieldsManagers: [{FIELD_MANAGER}]}}] and the sync option RespectIgnoreDifferences=true, so "
                f"self-heal leaves the fields nsscaler sets")
    if tool_name == FLUX:
        return (f"in its Flux Kustomization set driftIgnoreRules [{{paths: [{pointer}], target: {{kind: {kind}}}}}] "
                f"(HelmRelease: driftDetection.ignore with the same rule), or drop {pointer} from the manifests "
                f"in Git, so Flux stops correcting it")
    who = manager or "whoever scales it"
    return f"stop {who} from scaling it during the freeze, or {_EXCLUDE_HINT}"


@dataclass(frozen=True, slots=True)
class Revert:
    """A frozen workload found scaled up again: who did it, and what ends the fight."""

    policy: str
    namespace: str
    kind: str
    name: str
    manager: str | None
    tool: str | None
    fix: str

    @property
    def message(self) -> str:
        by = self.manager or "an unknown client"
        if self.tool:
            by += f" ({self.tool})"
        return (f"{self.kind} {self.name} in {self.namespace} was scaled up by {by} while NSScaler {self.policy} "
                f"held it; nsscaler froze it again and kept its recorded count. To stop the fight: {self.fix}")


def revert(*, policy: str, namespace: str, kind: str, api_version: str, name: str, size_path: Sequence[str],
           manager: str | None, managed_by: str | None) -> Revert:
    """Describe one revert; `managed_by` is the tool found from the object's tracking marks, if any. `kind`
    as a policy names it (`Rollout.argoproj.io`): the report keeps it, the fix says the object's own `kind:`
    (`Rollout`, with its group apart), the only form Argo CD and Flux match."""
    tool_name = tool_of(manager, managed_by)
    group = api_version.rpartition("/")[0]
    pointer = "/" + "/".join(size_path)
    return Revert(policy=policy, namespace=namespace, kind=kind, name=name, manager=manager, tool=tool_name,
                  fix=fix(tool_name=tool_name, kind=kind.partition(".")[0], group=group, pointer=pointer,
                          manager=manager))
