"""The changes a run decides, and what became of each: values passed from decide to write and back."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from job.model.workloads import Workload, adopt_patch, freeze_patch, restore_patch


class Verb(enum.StrEnum):
    FREEZE = "freeze"
    RESTORE = "restore"
    ADOPT = "adopt"  # a frozen workload's record passes to the policy that holds its namespace now
    PAUSE = "pause"  # the KEDA ScaledObject of a frozen workload stops scaling it
    RESUME = "resume"  # ... and gets its own pause setting back before the workload is restored


@dataclass(frozen=True, slots=True)
class Action:
    """One change to send. A freeze, restore or adoption builds its merge patch when it is sent (`patch`),
    so a run that changes 40,000 workloads never holds 40,000 patches; other changes carry their `body`."""

    verb: Verb
    workload: Workload
    policy: str
    body: dict[str, Any] | None
    after: int
    reason: str
    dry_run: bool

    @property
    def patch(self) -> dict[str, Any]:
        if self.body is not None:
            return self.body
        if self.verb is Verb.FREEZE:
            return freeze_patch(self.workload, policy=self.policy)
        if self.verb is Verb.RESTORE:
            return restore_patch(self.workload)
        if self.verb is Verb.ADOPT:
            return adopt_patch(self.workload, policy=self.policy)
        raise ValueError(f"a {self.verb.value} action carries its body")


@dataclass(frozen=True)
class Problem:
    """Something the plan will not do and a user must look at (e.g. a malformed record)."""

    policy: str
    workload: Workload
    message: str


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What sending one action achieved: applied, dry-run, settled (nothing left to do after a 409), gone
    (deleted during the run) or failed (`message` says why)."""

    action: Action
    outcome: str
    message: str = ""


def failure_message(result: ActionResult) -> str:
    """Why a change failed, with what to do when the failed write was also the one that keeps data safe."""
    workload = result.action.workload
    if result.action.verb is not Verb.FREEZE:  # a pause or resume is of a ScaledObject, no workload kind
        return result.message
    guard = workload.kind_handler.guard
    if guard is not None and workload.guard_value not in (None, guard.safe):
        return f"{result.message}; {guard.refused}"
    return result.message
