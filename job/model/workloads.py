"""What nsscaler knows about a workload, and the record it leaves on the ones it freezes.

Each kind sits behind one small interface (`job.model.kinds`: is it running, the patch that freezes it, the
patch that restores it, where its Pods come from), so the planner never branches on kind. The annotation and
label keys are owned here (the two record keys by `job.model.kinds`, re-exported).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from job.model import managed
from job.model.activity import Change, last_user_change, parse_time
from job.model.kinds import (
    BUILTIN,
    Kind,
    KindHandler,
    MalformedRecord,
    PausedBy,
    RecordedKind,
    paused_owner,
    selecting_kinds,
)
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_FREED,
    ANNOTATION_RESTORE_TIER,
    ANNOTATION_SCALED_BY,
    FIELD_MANAGER,
    HOLD_ANNOTATIONS,
    LABEL_HOLD,
    LABEL_SCALED,
)
from job.model.resources import footprint_of, parse_record


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    terminating: bool = False
    created: dt.datetime | None = None  # creationTimestamp: the first activity of a namespace
    #: the hold mark as the namespace carries it (`hold_mark`; empty: none), so a run writes it only when it changes
    hold: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Workload:
    """A slim, immutable view of one workload: only what the decisions need.

    `size` is replicas for scalable kinds, and 1 (running) or 0 (suspended or finished) for CronJobs
    and Jobs; None when it was read from metadata alone and cannot be known from it (see
    `size_from_metadata`): the run reads the whole object before any decision needs it. `original` is
    the raw recorded value (None when nsscaler holds no record), kept raw so that a malformed record
    is reported instead of being silently reinterpreted. `controller` is the
    kind of its controller owner, if any (a Deployment's ReplicaSet, a CronJob's Job), and
    `controller_name` its name (an excluded CronJob keeps its Jobs running). `handler` is the kind's
    handler for this run (a built-in one when not given); a ScaledObject's is not a workload kind's
    (`recorded_from_api`).
    """

    kind: Kind
    namespace: str
    name: str
    resource_version: str
    size: int | None
    original: str | None = None
    scaled_by: str | None = None
    excluded: bool = False
    uid: str = ""
    last_user_change: Change | None = None  # for keep_recent: see job.model.activity
    controller: str | None = None
    controller_name: str | None = None
    handler: RecordedKind | None = field(default=None, compare=False, repr=False)
    #: the field manager that last wrote the size field (not nsscaler): who scaled it up during a freeze
    replicas_manager: str | None = None
    #: "Argo CD" or "Flux" when one of them manages the workload (tracking marks or field managers)
    gitops: str | None = None
    #: the value of its kind's guarded field (`job.model.kinds.Guard`) when read whole, and the value a
    #: freeze recorded before it set the safe one
    guard_value: str | None = None
    guard_original: str | None = None
    #: what besides the size its kind's restore puts back, when read whole (`KindHandler.state_of`)
    state: str | None = None
    #: what one unit asks the scheduler for, as its freeze would record it (`job.model.resources`): known
    #: from the whole object only, and only once the overhead of its RuntimeClass is added (`runtime_class`)
    footprint: str | None = None
    #: the RuntimeClass whose Pod overhead `footprint` still lacks (`with_overhead` adds it)
    runtime_class: str | None = None
    #: the footprint its freeze recorded (`marks.ANNOTATION_FREED`), raw; None for a freeze older than it
    freed: str | None = None
    #: its user-set restore tier (`marks.ANNOTATION_RESTORE_TIER`), raw, so a malformed one is reported
    tier: str | None = None
    #: whether its controller reports it available (`KindHandler.available`); None when read from metadata alone
    available: bool | None = None
    #: why its kind's row says it may not be frozen now (`KindHandler.blocked`: an operator that wants it healthy
    #: first); None when it may, or when it was read from metadata alone
    blocked: str | None = None
    #: what its operator reports while the freeze has not taken effect its way (`KindHandler.settled`: the row's
    #: condition not reached yet); None once it has, for kinds no operator reports on, or when read from metadata
    #: alone (`sizes_needed` reads a frozen one of those whole)
    unsettled: str | None = None
    #: when nsscaler last froze or restored it (its field manager's time, RFC 3339), None if it never did or
    #: someone has since taken over every field it wrote
    written_by_nsscaler: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind.value, self.namespace, self.name)

    @property
    def handling(self) -> RecordedKind:
        """Where it lives, its record, how its size reads: what any object nsscaler writes has."""
        return self.handler or BUILTIN[self.kind]

    @property
    def kind_handler(self) -> KindHandler:
        """Its workload kind's handler: what only selection, a freeze and a restore of a workload ask."""
        if self.handler is None:
            return BUILTIN[self.kind]
        if not isinstance(self.handler, KindHandler):
            # A ScaledObject is paused and resumed by job.decide.autoscalers, never selected or frozen as a workload.
            raise TypeError(f"{self.ref} is not a workload")
        return self.handler

    @property
    def owner_key(self) -> tuple[str, str, str] | None:
        """Its controller owner as (kind, namespace, name), comparable with `exclusion_key`."""
        if self.controller is None or self.controller_name is None:
            return None
        return (self.controller, self.namespace, self.controller_name)

    @property
    def exclusion_key(self) -> tuple[str, str, str]:
        """(kind as an ownerReference names it, namespace, name): how the objects it controls refer to it."""
        return (self.kind.short, self.namespace, self.name)

    @property
    def has_record(self) -> bool:
        return self.original is not None

    @property
    def selecting_kinds(self) -> frozenset[Kind]:
        """The kinds whose selection by a policy freezes this workload."""
        return selecting_kinds(self.kind_handler, self.controller)

    @property
    def paused_owner(self) -> PausedBy | None:
        """The paused operator kind of its controller, when a `pause` row freezes it through that operator."""
        if self.controller is None or not getattr(self.handler, "paused_by", None):
            return None  # the common case, costing nothing: no pause row, or no controller
        return paused_owner(self.kind_handler, self.controller)

    @property
    def frozen_with_its_owner(self) -> bool:
        """True when its controller owner is the one to freeze (a Deployment's ReplicaSet), never itself; not
        when its owner is an operator paused before it is scaled."""
        return (self.controller is not None and not self.kind_handler.freezes_controlled
                and self.paused_owner is None)

    def record_is_valid(self) -> bool:
        if self.original is None:
            return False
        try:
            self.handling.restored_body(self.original)
        except MalformedRecord:
            return False
        return True

    @property
    def short_ref(self) -> str:
        """`deployment/web`: as kubectl names it within its namespace."""
        return f"{self.kind.short.lower()}/{self.name}"

    @property
    def ref(self) -> str:
        return f"{self.short_ref} in {self.namespace}"


def with_overhead(workload: Workload, overheads: Mapping[str, Mapping[str, int]] | None) -> Workload:
    """Its footprint completed with the Pod overhead of its RuntimeClass (`overheads`: RuntimeClass name ->
    `overhead.podFixed`, as `job.model.resources.overheads` gives it); unknown when that is not known."""
    if workload.runtime_class is None:
        return workload
    found = (overheads or {}).get(workload.runtime_class)
    parsed = parse_record(workload.footprint) if found is not None else None
    return replace(workload, runtime_class=None,
                   footprint=parsed.with_overhead(found).record() if parsed is not None and found is not None
                   else None)


def _controller(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """The kind and name of its controller owner, if any."""
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return (str(owner.get("kind")), str(owner.get("name"))) if owner else (None, None)


def size_from_metadata(handler: RecordedKind, meta: dict[str, Any]) -> int | None:
    """The size of an object known from its metadata alone, or None.

    It is known when the object carries our record and nsscaler still owns its size field in
    `managedFields`: the API server hands a field to whoever changes its value, so nsscaler owning it
    means nobody changed it since nsscaler froze it (a restore removes the record in the same write).
    A steady state can then LIST metadata only, which costs the API server about half of a full LIST."""
    if handler.record_key not in (meta.get("annotations") or {}):
        return None
    frozen = handler.frozen_body()
    owners = managed.size_owners(meta.get("managedFields"), managed.size_path(frozen))
    if not any(manager == FIELD_MANAGER for _, manager in owners):
        return None
    return handler.size_of(_merged({"metadata": meta}, frozen))


def _interned(value: str | None) -> str | None:
    """Names that many workloads share (policies, field managers) are held once, not once per workload."""
    return None if value is None else sys.intern(value)


def _recorded(handler: RecordedKind, obj: dict[str, Any], *, metadata_only: bool) -> dict[str, Any]:
    """The fields of any object with a record, workload or not, as `Workload` keywords."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    fields = meta.get("managedFields") or []
    controller, controller_name = _controller(meta)
    return {
        "kind": handler.kind,
        "namespace": sys.intern(meta["namespace"]),  # one string per namespace, however many workloads
        "name": meta["name"],
        "resource_version": meta.get("resourceVersion", ""),
        "size": size_from_metadata(handler, meta) if metadata_only else handler.size_of(obj),
        "original": annotations.get(handler.record_key),
        "scaled_by": _interned(annotations.get(ANNOTATION_SCALED_BY)),
        "excluded": annotations.get(ANNOTATION_EXCLUDE, "").lower() == "true",
        "uid": meta.get("uid", ""),
        "last_user_change": last_user_change(meta),
        "controller": controller,
        "controller_name": controller_name,
        # a built-in kind's own handler is not kept per object; one a `pause` row extends is
        "handler": None if BUILTIN.get(handler.kind) is handler else handler,
        "replicas_manager": _interned(managed.size_manager(fields, managed.size_path(handler.frozen_body()),
                                                           ignore=FIELD_MANAGER)),
        "gitops": managed.tool(annotations=annotations, labels=meta.get("labels") or {},
                               managers=(str(m.get("manager")) for m in fields)),
        "freed": _interned(annotations.get(ANNOTATION_FREED)),
        "tier": _interned(annotations.get(ANNOTATION_RESTORE_TIER)),
        # freezes sent together share their second: one string for them all
        "written_by_nsscaler": _interned(managed.written_at(fields, FIELD_MANAGER)),
    }


def recorded_from_api(handler: RecordedKind, obj: dict[str, Any]) -> Workload:
    """An object that is not a workload but carries a record (a ScaledObject): nothing about its Pods, its
    availability or a guard, which only a workload kind knows."""
    return Workload(**_recorded(handler, obj, metadata_only=False))


def from_api(kind: Kind | KindHandler, obj: dict[str, Any], *, metadata_only: bool = False) -> Workload:
    """Reduce one API object to a Workload right away, so a large LIST never stays in memory whole.
    `metadata_only`: `obj` came from a metadata-only LIST (no spec, no status)."""
    handler = BUILTIN[kind] if isinstance(kind, str) else kind
    guard, annotations = handler.guard, (obj.get("metadata") or {}).get("annotations") or {}
    try:
        recorded = _recorded(handler, obj, metadata_only=metadata_only)
    except (ValueError, TypeError, AttributeError, OverflowError):
        # a custom kind's spec may hold anything its CRD lets through: read from its metadata alone, its size is
        # unknown and the planner says so on it (`could not read its size`), leaving it as it is
        recorded, metadata_only = _recorded(handler, obj, metadata_only=True), True
    footprint, runtime_class = (None, None) if metadata_only else footprint_of(*handler.pod_template(obj))
    return Workload(
        **recorded,
        guard_value=None if metadata_only or guard is None else guard.value_in(obj),
        state=None if metadata_only else handler.state_of(obj),
        guard_original=annotations.get(guard.record_key) if guard else None,
        # many workloads share a template: their footprints and records are held once
        footprint=_interned(footprint.record()) if footprint is not None else None,
        runtime_class=_interned(runtime_class),
        available=None if metadata_only else handler.available(obj),
        blocked=None if metadata_only else handler.blocked(obj),
        unsettled=None if metadata_only else handler.settled(obj),
    )


def namespace_from_api(obj: dict[str, Any]) -> Namespace:
    meta = obj["metadata"]
    return Namespace(name=meta["name"], terminating=bool(meta.get("deletionTimestamp")),
                     created=parse_time(meta.get("creationTimestamp")), hold=hold_mark(meta))


def hold_mark(meta: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The hold mark of a Namespace's metadata: its label and annotations, sorted (`job.decide.hold`)."""
    found = {**{k: v for k, v in (meta.get("labels") or {}).items() if k == LABEL_HOLD},
             **{k: v for k, v in (meta.get("annotations") or {}).items()
                if k in HOLD_ANNOTATIONS}}
    return tuple(sorted((k, str(v)) for k, v in found.items()))


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def freeze_patch(workload: Workload, *, policy: str) -> dict[str, Any]:
    """Size to zero and the record, in one merge patch. An existing record is never overwritten:
    a workload scaled up by hand during a freeze keeps its pre-freeze count."""
    handler = workload.kind_handler
    if workload.original is not None:
        original = workload.original
    elif workload.size is not None:
        original = handler.original_value(workload.size, workload.state)
    else:
        raise ValueError(f"{workload.ref}: freezing needs its size, read only from metadata")
    # what it frees, known only from a whole object; when it is not, an older record of it goes (unknown, not stale)
    known = workload.footprint if workload.runtime_class is None else None
    freed = {ANNOTATION_FREED: known} if known or workload.freed is not None else {}
    annotations = {handler.record_key: original, ANNOTATION_SCALED_BY: policy, **freed}
    body = handler.frozen_body()
    guard = handler.guard
    if guard is not None and workload.guard_value not in (None, guard.safe):
        body = _merged(body, guard.body(guard.safe))
        if workload.guard_original is None:  # scaled up again during the freeze: the first value stays
            annotations[guard.record_key] = workload.guard_value
    return _merged({
        "metadata": {
            "resourceVersion": workload.resource_version,
            "annotations": annotations,
            "labels": {LABEL_SCALED: "true"},
        },
    }, body)


def adopt_patch(workload: Workload, *, policy: str) -> dict[str, Any]:
    """Hand a frozen workload's record over to the policy that holds its namespace now."""
    return {"metadata": {"resourceVersion": workload.resource_version,
                         "annotations": {ANNOTATION_SCALED_BY: policy}}}


def restore_patch(workload: Workload) -> dict[str, Any]:
    """The recorded size back and the record removed, in one merge patch. Raises MalformedRecord."""
    handler = workload.kind_handler
    assert workload.original is not None
    annotations: dict[str, str | None] = {handler.record_key: None, ANNOTATION_SCALED_BY: None,
                                          **({ANNOTATION_FREED: None} if workload.freed is not None else {})}
    body = handler.restored_body(workload.original)
    if handler.guard is not None and workload.guard_original is not None:
        body = _merged(body, handler.guard.body(workload.guard_original))
        annotations[handler.guard.record_key] = None
    return _merged({
        "metadata": {
            "resourceVersion": workload.resource_version,
            "annotations": annotations,
            "labels": {LABEL_SCALED: None},
        },
    }, body)
