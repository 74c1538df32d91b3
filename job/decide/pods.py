"""Why Pods still run in held namespaces: each live Pod's controlling owner chain, and what to tell the user
about it. Pure: the caller sends the LISTs this module asks for and feeds it their items.

Chains followed (controller owner references only): Pod → ReplicaSet → Deployment, Pod → Job → CronJob,
Pod → StatefulSet, Pod → DaemonSet; a Pod without a controller is its own owner. The chain ends at an object
with no controller, or at a kind this module does not LIST (a custom resource: its name still comes from the
owner reference). The kinds a policy freezes that this module does not LIST (ReplicationController, custom
kinds such as `Rollout.argoproj.io`, whose ReplicaSets it LISTs) are read whole by the run already: the caller
seeds them (`Census.seed`), so their chains end with their marks known, at no request.

What a chain means for one policy, in this order (the first rule that matches):
1. some object on it is annotated `nsscaler.wubw.fun/exclude: "true"`: the Pods are meant to run; they do not
   block `done` and are counted as `podsExcluded`;
2. some object on it carries nsscaler's record label: it is frozen, its Pods are still terminating;
3. a change to some object on it failed this run: that error;
4. it ends in a bare Pod (or a Node: a static Pod): nsscaler does not freeze those;
5. its root's kind is selected by the policy (or it passes through a Job and Jobs are selected: a Job is
   suspended whether or not a CronJob owns it): not frozen by this run (dry run, freeze cap, or it changed
   during the run);
6. otherwise its root's kind is not selected.

Cost: owners are read with metadata-only LISTs, one per kind and namespace for the few namespaces that still
have Pods, or one cluster-wide LIST per kind when more than `NAMESPACED_LISTS_MAX` namespaces need that kind:
the number of requests depends on the kinds and (up to that bound) the namespaces, never on the Pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from job.model.kinds import BUILTIN_GROUPS, FOLLOWED, FREEZES_CONTROLLED
from job.model.marks import ANNOTATION_EXCLUDE, EXCLUDE_FIX, LABEL_SCALED

#: Kinds whose objects are read to follow a chain: kind -> (apiVersion, plural), from the kind registry.
LISTABLE: Mapping[str, tuple[str, str]] = {kind: (h.api_version, h.plural) for kind, h in FOLLOWED.items()}
#: Up to this many namespaces a kind is LISTed namespace by namespace; beyond it, once cluster-wide.
NAMESPACED_LISTS_MAX = 4
_MAX_DEPTH = 8  # owner chains are two or three links long; this only guards against a reference loop
_UNFROZEN = {"Pod": "bare Pods", "Node": "static Pods"}  # a static Pod's owner is its Node


@dataclass(frozen=True, slots=True, order=True)
class Ref:
    """One object by kind ("Deployment"; "Rollout.argoproj.io" outside the built-in groups) and name."""

    kind: str
    namespace: str
    name: str

    @property
    def owner(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class Meta:
    """What a chain needs of one object: its controller, and nsscaler's marks on it."""

    ref: Ref
    controller: Ref | None = None
    excluded: bool = False
    frozen: bool = False


@dataclass(frozen=True, slots=True)
class Remaining:
    """Pods that still run in a held namespace, grouped by the owner at the end of their chain."""

    namespace: str
    owner: str
    pods: int
    reason: str


def kind_of(kind: str, api_version: str) -> str:
    group = api_version.rpartition("/")[0]
    return kind if group in BUILTIN_GROUPS else f"{kind}.{group}"


def reduce(kind: str, meta: Mapping[str, Any]) -> Meta:
    """One object's metadata (a metadata-only LIST item) as a chain link."""
    namespace = str(meta.get("namespace", ""))
    controller = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    annotations = meta.get("annotations") or {}
    return Meta(
        ref=Ref(kind, namespace, str(meta.get("name", ""))),
        controller=Ref(kind_of(str(controller.get("kind")), str(controller.get("apiVersion", ""))), namespace,
                       str(controller.get("name"))) if controller else None,
        excluded=str(annotations.get(ANNOTATION_EXCLUDE, "")).lower() == "true",
        frozen=(meta.get("labels") or {}).get(LABEL_SCALED) == "true",
    )


@dataclass
class Census:
    """The live Pods of held namespaces grouped by their first owner, and the owners read so far.

    Memory grows with the owners, not the Pods: a Pod is reduced to a count on its controller's Ref (a bare
    Pod keeps its own link, for its annotation)."""

    groups: Counter[Ref] = field(default_factory=Counter)
    known: dict[Ref, Meta] = field(default_factory=dict)
    listed: set[tuple[str, str | None]] = field(default_factory=set)
    errors: dict[str, str] = field(default_factory=dict)

    def add_pod(self, meta: Mapping[str, Any]) -> None:
        link = reduce("Pod", meta)
        if link.controller is None:
            self.known[link.ref] = link
            self.groups[link.ref] += 1
        else:
            self.groups[link.controller] += 1

    @property
    def namespaces(self) -> set[str]:
        return {ref.namespace for ref in self.groups}

    def lookups(self) -> list[tuple[str, str | None]]:
        """The LISTs (kind, namespace; None: cluster-wide) still needed to follow every chain one link
        further. Empty when every chain is complete, so a run with no Pod left sends none."""
        wanted: dict[str, set[str]] = {}
        for start in self.groups:
            ref: Ref | None = start
            for _ in range(_MAX_DEPTH):
                if ref is None:
                    break
                meta = self.known.get(ref)
                if meta is None:
                    if ref.kind in LISTABLE and not self._listed(ref):
                        wanted.setdefault(ref.kind, set()).add(ref.namespace)
                    break
                ref = meta.controller
        plan: list[tuple[str, str | None]] = []
        for kind in sorted(wanted):
            namespaces = sorted(wanted[kind])
            plan += [(kind, None)] if len(namespaces) > NAMESPACED_LISTS_MAX else [(kind, ns) for ns in namespaces]
        return plan

    def _listed(self, ref: Ref) -> bool:
        return (ref.kind, None) in self.listed or (ref.kind, ref.namespace) in self.listed

    def add_owners(self, kind: str, namespace: str | None, items: Iterable[Mapping[str, Any]]) -> None:
        """The items of one lookup; of a cluster-wide LIST only those in namespaces with Pods are kept."""
        self.listed.add((kind, namespace))
        wanted = self.namespaces
        for item in items:
            meta = item.get("metadata") or {}
            if meta.get("namespace") in wanted:
                link = reduce(kind, meta)
                self.known[link.ref] = link

    def seed(self, owners: Iterable[Meta]) -> None:
        """Owners the run read already (the workloads it LISTed whole): known without a LIST."""
        for meta in owners:
            self.known[meta.ref] = meta

    def failed(self, kind: str, namespace: str | None, error: str) -> None:
        self.listed.add((kind, namespace))
        self.errors[kind] = error

    def chain(self, start: Ref) -> list[tuple[Ref, Meta | None]]:
        links: list[tuple[Ref, Meta | None]] = []
        ref: Ref | None = start
        while ref is not None and len(links) < _MAX_DEPTH and all(ref != r for r, _ in links):
            meta = self.known.get(ref)
            links.append((ref, meta))
            ref = meta.controller if meta else None
        return links


@dataclass(frozen=True)
class PolicyView:
    """What explaining a chain needs to know of one policy's run."""

    kinds: frozenset[str]
    dry_run: bool = False
    capped: bool = False
    failures: Mapping[Ref, str] = field(default_factory=dict)


def explain(links: list[tuple[Ref, Meta | None]], *, view: PolicyView, errors: Mapping[str, str]) -> str | None:
    """Why a chain's Pods still run, with the fix in the same sentence; None when they are meant to run."""
    if any(meta and meta.excluded for _, meta in links):
        return None
    root = links[-1][0]
    if any(meta and meta.frozen for _, meta in links):
        return "frozen by nsscaler; its Pods are still terminating"
    failed = next(((ref, view.failures[ref]) for ref, _ in links if ref in view.failures), None)
    if failed:
        return f"freezing {failed[0].owner} failed: {failed[1]}; the next run tries again"
    unread = next((ref for ref, meta in links if meta is None and ref.kind in errors), None)
    if unread:
        return f"could not read its {unread.kind}: {errors[unread.kind]}; the next run tries again"
    if root.kind in _UNFROZEN:
        return (f"nsscaler does not freeze {_UNFROZEN[root.kind]}: {EXCLUDE_FIX}, or remove it")
    passes = {ref.kind for ref, _ in links} & FREEZES_CONTROLLED
    if root.kind in view.kinds or passes & view.kinds:
        if view.dry_run:
            return "not frozen: dry run"
        if view.capped:
            return "not frozen: this run froze nothing, over the max_freeze cap"
        return "not frozen by this run (it is at zero or changed during the run); the next run looks again"
    return f"{root.kind} is not in spec.kinds: add {root.kind} to spec.kinds, or {EXCLUDE_FIX}"


def tally(census: Census, namespaces: Iterable[str], *, view: PolicyView) -> tuple[list[Remaining], int]:
    """For one policy: the owners whose Pods still run in its held `namespaces` (sorted by namespace and
    owner), and how many Pods there run as meant (excluded)."""
    held = set(namespaces)
    remaining: Counter[tuple[str, str, str]] = Counter()
    excluded = 0
    for start, count in census.groups.items():
        if start.namespace not in held:
            continue
        links = census.chain(start)
        reason = explain(links, view=view, errors=census.errors)
        if reason is None:
            excluded += count
        else:
            remaining[(start.namespace, links[-1][0].owner, reason)] += count
    return [Remaining(ns, owner, n, reason) for (ns, owner, reason), n in sorted(remaining.items())], excluded
