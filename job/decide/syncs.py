"""Which GitOps syncs the hold refused, and which policy each counts against (pure, no I/O).

A sync the hold refuses leaves nothing in the held namespace, but its controller keeps the refusal in its own
object (`job.model.syncs`). Rules:

1. An object's last attempt counts as refused when the words of its failure carry a refusal by the hold
   (`job.decide.hold.held_namespaces`: the API server names the admission policy, the words name the namespace).
2. It counts against the policy whose hold that namespace carries now (`job.decide.hold.holding_policy`), not the
   one the words name: a namespace woken, kept running or out of scope since then refuses no more, so it counts
   for none (the controller's next attempt goes through). One object counts once per policy, with the first such
   namespace it names.
3. Its `since` is the one the last run recorded for the same object and revision, so that it says since when that
   revision has been refused; a new revision starts again from what the object says (or `now`).
4. A `SyncRefused` Event is said once per object and revision: only for an entry the last run's status did not
   list with that revision (`new_refusals`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from job.decide.hold import held_namespaces, holding_policy
from job.decide.selection import Selection
from job.model.stamps import utc_stamp
from job.model.syncs import SyncAttempt

#: `status.syncsRefused`: the key of the list in a policy's status and in the JSON report
STATUS_KEY = "syncsRefused"


@dataclass(frozen=True, slots=True)
class RefusedSync:
    """A GitOps object whose last sync into a namespace the policy holds was refused by the hold."""

    policy: str
    attempt: SyncAttempt
    #: the held namespace the refused request was sent to
    namespace: str
    since: str

    @property
    def key(self) -> tuple[str, str]:
        """What an Event is said once for: the object and its revision."""
        return self.attempt.ref, self.attempt.revision

    @property
    def message(self) -> str:
        a = self.attempt
        at = f" at revision {a.revision}" if a.revision else ""
        return (f"{a.kind.tool} {a.ref} could not sync{at} into {self.namespace}: NSScaler {self.policy} holds it "
                f"(refused by the hold since {self.since or 'its last attempt'}); wake the namespace to let it "
                f"through, or have {a.kind.tool} leave the fields nsscaler holds (docs: GitOps)")


def _previous(status: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(object, revision) -> since, as the last run recorded them."""
    entries = status.get(STATUS_KEY)
    return {(str(e.get("object")), str(e.get("revision") or "")): str(e.get("since") or "")
            for e in entries if isinstance(e, Mapping)} if isinstance(entries, list) else {}


def refused(attempts: Iterable[SyncAttempt], selection: Selection | None, *, now: dt.datetime | None,
            previous: Mapping[str, Mapping[str, Any]]) -> dict[str, list[RefusedSync]]:
    """Rules 1 to 3: per policy name, the syncs its hold refused, sorted by object. `previous`: each policy's last
    status, by name."""
    found: dict[str, list[RefusedSync]] = {}
    recorded = {name: _previous(status) for name, status in previous.items()}
    for a in attempts:
        counted: set[str] = set()
        for namespace in (ns for text in a.failures for ns in held_namespaces(text)):
            policy = holding_policy(selection, namespace)
            if policy is None or policy.name in counted:
                continue
            counted.add(policy.name)
            since = recorded.get(policy.name, {}).get((a.ref, a.revision)) or a.since or (utc_stamp(now) if now else "")
            found.setdefault(policy.name, []).append(RefusedSync(policy.name, a, namespace, since))
    return {name: sorted(syncs, key=lambda r: r.attempt.ref) for name, syncs in found.items()}


def entries(syncs: Iterable[RefusedSync]) -> list[dict[str, Any]]:
    """`status.syncsRefused` and the JSON report's: one shape, defined once."""
    return [{"object": r.attempt.ref, "gitOps": r.attempt.kind.tool, "namespace": r.namespace,
             "revision": r.attempt.revision, "since": r.since} for r in syncs]


def new_refusals(syncs: Sequence[RefusedSync], previous: Mapping[str, Any]) -> list[RefusedSync]:
    """Rule 4: the refused syncs the last run's status did not list with the same revision."""
    said = set(_previous(previous))
    return [r for r in syncs if r.key not in said]
