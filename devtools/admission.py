"""Generate the admission policy that keeps nsscaler's own ServiceAccount to what a run writes, from the kind
registry, so that a new kind cannot forget it: `kustomize/base/run-admission.yaml`.

What a run may change on an object is read from the same handlers that make its writes
(`job.model.kinds.BUILTIN`, the KEDA ScaledObject's handler): the fields its freeze patch sets (`frozen_body`:
`spec.replicas`, `spec.suspend`, the DaemonSet's own node-selector key, KEDA's paused-replicas annotation) and
the field its guard sets (a StatefulSet's claim retention). Everything else of the object must be as it was,
but for nsscaler's own annotations and labels (`nsscaler.wubw.fun/...`) and what the API server itself changes
(resourceVersion, generation, managedFields). The writes that are not workloads (the routes, the statuses, the
Lease, Events, ReferenceGrants, the access reviews, a release's suspension of nsscaler's own CronJob) are rows
here too, each naming the module that sends them.
A kind of the shipped catalogue frozen by one field or annotation (`job.model.kinds.catalogue`) may change only
that field or annotation, one frozen through its replica count (`/scale` rows) only whole numbers of its spec;
any other custom kind only what a row can change (whole numbers and booleans of its spec, one annotation, one
label), and a kind a team adds as an NSScalerKind exactly what its row changes (`devtools.row_admission`, a
second policy in the same file). nsscaler's own API group is refused but for the rows of `other_rows`.

The policy matches only requests of a ServiceAccount named `nsscaler` (`system:serviceaccount:<its namespace>:nsscaler`,
whichever namespace it is installed in); nobody else is affected.

`python -m devtools.admission` rewrites the file, and the hold's (`devtools.hold_admission`: `make admission`);
`--check` fails when either is stale (`make lint`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from job.decide import hold
from job.model.autoscalers import ScaledObjectHandler
from job.model.kinds import BUILTIN, RecordedKind
from job.model.kinds import httproute as hr
from job.model.kinds.catalogue import CATALOGUE
from job.model.kinds.field import FieldHandler
from job.model.marks import (
    ANNOTATION_HOLD_ACCOUNT,
    ANNOTATION_RELEASED,
    DOMAIN,
    FINALIZER_ROUTES,
    HOLD_ANNOTATIONS,
    HOLD_MODES,
    LABEL_HOLD,
    OWN_CRONJOB,
    WAKER_SERVICE,
)

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "kustomize" / "base" / "run-admission.yaml"
NAME = "nsscaler-run-writes-only-what-a-run-writes"
ACCOUNT = hold.ACCOUNT
#: nsscaler's own account, in whichever namespace it is installed (the chart lets one choose): its own namespace
#: is the one in its user name
MATCH = (f"request.userInfo.username.startsWith('system:serviceaccount:') && "
         f"request.userInfo.username.endsWith(':{ACCOUNT}') && request.userInfo.username.split(':').size() == 4")
OWN = "request.userInfo.username.split(':')[2]"
LEASE = "nsscaler-run"
#: nsscaler's own API group (NSScalers, Wakes, NSScalerKinds): its account writes there only the rows below
OWN_GROUP = "operators.wubw.fun"
#: a tree of the fields a write may change: a key mapped to None may change freely, to a tree only as it says
Tree = Mapping[str, "Tree | None"]
#: what the API server changes on every write, whoever sends it
_SERVER_SET: Tree = {"resourceVersion": None, "generation": None, "managedFields": None}
#: annotations the API server itself changes in the same write, by resource: a DaemonSet counts its template's
#: changes (the freeze's node selector is one)
_SERVER_ANNOTATIONS = {"daemonsets": ("deprecated.daemonset.template.generation",)}
#: API groups of Kubernetes itself without a dot; any other group with a dot that is not `*.k8s.io` is a custom kind's
_CORE_GROUPS = ("", "apps", "batch", "policy", "autoscaling", "extensions")
_OWN = f"'{DOMAIN}/'"
#: the request's fields that are left out when empty (a core group, no subresource, a cluster-scoped object)
GROUP = "request.resource.?group.orValue('')"
SUB = "request.?subResource.orValue('')"
NS = "request.?namespace.orValue('')"
#: the hold mark on a Namespace (`job.decide.hold`): the only keys a run writes there, each where it belongs (a
#: label of the mark's annotation keys, or an annotation of its label key, is refused)
HOLD_LABELS = (LABEL_HOLD,)
OBJ = "request.?name.orValue('')"


@dataclass(frozen=True)
class Row:
    """One resource a run updates: where it lives, what of it may change, and what a refused user reads."""

    group: str
    resource: str
    spec: Tree
    says: str
    subresource: str = ""
    #: annotation keys not nsscaler's own that the write sets (KEDA's paused-replicas)
    annotations: tuple[str, ...] = ()
    #: label keys not nsscaler's own that the write sets (an operator's pause label: a `pause` row)
    labels: tuple[str, ...] = ()
    finalizers: bool = False
    extra: str = ""  # one more condition of this row, CEL
    #: the only keys of nsscaler's own that may change, of the annotations and of the labels; None: any under
    #: its domain
    own_annotations: tuple[str, ...] | None = None
    own_labels: tuple[str, ...] | None = None


def _merge(trees: Iterable[Tree]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tree in trees:
        for key, sub in tree.items():
            if sub is None or out.get(key, {}) is None:
                out[key] = None
            else:
                out[key] = _merge([out.get(key) or {}, sub])
    return out


def _leaves(body: Mapping[str, Any]) -> Tree:
    """The tree of a patch body's leaves: each may change."""
    return {k: _leaves(v) if isinstance(v, Mapping) else None for k, v in body.items()}


def _path(path: tuple[str, ...]) -> Tree:
    tree: Tree | None = None
    for key in reversed(path):
        tree = {key: tree}
    return tree or {}


def changes(handler: RecordedKind) -> tuple[Tree, tuple[str, ...]]:
    """What a handler's writes change besides nsscaler's own record: the fields of its freeze (and its guard),
    and the annotations not nsscaler's own that it sets."""
    body = dict(handler.frozen_body())
    meta = body.pop("metadata", None) or {}
    foreign = tuple(k for k in (meta.get("annotations") or {}) if not k.startswith(DOMAIN))
    guard = getattr(handler, "guard", None)
    return _merge([_leaves(body), _path(guard.path) if guard else {}]), foreign


def foreign_labels(handler: RecordedKind) -> tuple[str, ...]:
    """The label keys not nsscaler's own that a handler's freeze sets (an operator's pause label)."""
    labels = (handler.frozen_body().get("metadata") or {}).get("labels") or {}
    return tuple(k for k in labels if not k.startswith(DOMAIN))


def _dotted(tree: Tree, prefix: str = "") -> list[str]:
    out = []
    for key, sub in tree.items():
        out += [f"{prefix}{key}"] if sub is None else _dotted(sub, f"{prefix}{key}.")
    return out


def catalogue_handlers() -> list[RecordedKind]:
    """The handlers of the shipped catalogue's rows frozen by one field or annotation (`job.model.kinds.rows`);
    its `/scale` rows are `catalogue_scale_rows`."""
    return [FieldHandler(row.kind, row.kind.group, row.versions[0], str(row.plural), where=row.freeze.where,
                         value=row.freeze.value, row=row)
            for row in CATALOGUE if row.freeze.method != "scale" and row.freeze.value is not None]


def catalogue_scale_rows() -> list[Row]:
    """A row per catalogue kind frozen through its replica count (`freeze.method: scale`, its path known only
    from its CRD): its spec may change only in whole numbers, its metadata only in nsscaler's own keys; rule 1
    (`custom_validation`) would let one more annotation and label change."""
    spec = _numbers_only(_get("dyn(object)", "spec"), _get("dyn(oldObject)", "spec"), 3)
    return [Row(row.kind.group, str(row.plural), {"spec": None}, extra=spec,
                says=f"on a {row.kind.short} nsscaler may change only whole numbers of its spec (its replicas) and "
                     f"its own annotations and labels ({DOMAIN}/...)")
            for row in CATALOGUE if row.freeze.method == "scale"]


def workload_rows() -> list[Row]:
    """A row per built-in kind, one for KEDA's ScaledObject and one per catalogue row frozen by a field or an
    annotation, from their handlers; one per catalogue row frozen by its replica count."""
    rows = []
    for handler in [*BUILTIN.values(), ScaledObjectHandler(), *catalogue_handlers()]:
        tree, foreign = changes(handler)
        labels = foreign_labels(handler)
        fields = [*_dotted(tree), *foreign, *(f"the label {k}" for k in labels)]
        rows.append(Row(handler.group, handler.plural, tree,
                        annotations=(*foreign, *_SERVER_ANNOTATIONS.get(handler.plural, ())), labels=labels,
                        says=f"on a {handler.kind} nsscaler may change only {', '.join(fields)} and its own "
                             f"annotations and labels ({DOMAIN}/...)"))
    return [*rows, *catalogue_scale_rows()]


def other_rows() -> list[Row]:
    """The writes of a run that are not freezes: statuses (job/cluster/write.py), the routes and the routes
    finalizer (job/cluster/routes.py), the hold marks on Namespaces (job/cluster/hold.py), the run Lease
    (job/cluster/lease.py)."""
    record = f"'{DOMAIN}/original-rules'"
    waker = (f"object.spec.rules.all(r, !has(r.backendRefs) || r.backendRefs.all(b, b.name == '{WAKER_SERVICE}' "
             f"&& 'namespace' in dyn(b) && dyn(b)['namespace'] == {OWN}))")
    restore = (f"has(oldObject.metadata.annotations) && {record} in oldObject.metadata.annotations && "
               f"!(has(object.metadata.annotations) && {record} in object.metadata.annotations)")
    return [
        Row("operators.wubw.fun", "nsscalers", {}, finalizers=True,
            says=f"on an NSScaler nsscaler may change only its finalizer {FINALIZER_ROUTES}"),
        Row("operators.wubw.fun", "nsscalers", {"status": None}, subresource="status",
            says="nsscaler writes an NSScaler's status only"),
        Row("operators.wubw.fun", "wakes", {"status": None}, subresource="status",
            says="nsscaler writes a Wake's status only"),
        Row(hr.GROUP, hr.PLURAL, {"spec": {"rules": None}}, extra=f"({waker}) || ({restore})",
            says="on an HTTPRoute nsscaler may change only its rules, to send to the waker, or back as recorded "
                 "when it removes its record, and its own annotations and labels"),
        # a Namespace's labels select what other policies apply there (the hold's own bindings, the waker's
        # NetworkPolicy, Pod Security): only the hold mark may change, its label as a label (only to a mode) and
        # its annotations as annotations
        Row("", "namespaces", {}, own_annotations=HOLD_ANNOTATIONS, own_labels=HOLD_LABELS,
            extra=f"object.metadata.?labels[?'{LABEL_HOLD}'].orValue('{HOLD_MODES[0]}') in {list(HOLD_MODES)} && "
                  f"object.metadata.?annotations[?'{ANNOTATION_HOLD_ACCOUNT}'].orValue(request.userInfo.username) "
                  f"== request.userInfo.username",
            says=f"on a Namespace nsscaler may change only its hold mark: the label {LABEL_HOLD} "
                 f"({' or '.join(HOLD_MODES)}), the annotations {', '.join(HOLD_ANNOTATIONS)} (the account it "
                 f"names: its own)"),
        Row("coordination.k8s.io", "leases", {"spec": None},
            extra=f"{NS} == {OWN} && {OBJ} == '{LEASE}'",
            says=f"the only Lease nsscaler writes is {LEASE}, in its own namespace"),
    ]


def _has(obj: str, key: str) -> str:
    return f"has({obj}.{key})" if key.isidentifier() else f"('{key}' in {obj})"


def _get(obj: str, key: str) -> str:
    """`obj.key` as a dynamic map, {} where it is missing."""
    field = f"{obj}.{key}" if key.isidentifier() else f"{obj}['{key}']"
    return f"({_has(obj, key)} ? dyn({field}) : dyn({{}}))"


def same(new: str, old: str, tree: Tree) -> str:
    """CEL: `new` and `old` are equal, but where `tree` lets them differ."""
    if not tree:
        return f"{new} == {old}"
    kept = " && ".join(f"k != '{key}'" for key in tree)
    parts = [f"{new}.all(k, !({kept}) || (k in {old} && {new}[k] == {old}[k]))",
             f"{old}.all(k, !({kept}) || k in {new})"]
    parts += [same(_get(new, key), _get(old, key), sub) for key, sub in tree.items() if sub is not None]
    return " && ".join(f"({p})" for p in parts)


def keys_kept(new: str, old: str, allowed: tuple[str, ...] = (), *, own: tuple[str, ...] | None = None) -> str:
    """CEL: the maps `new` and `old` differ only in keys under nsscaler's domain (only the keys `own`, when
    given) and `allowed`."""
    ours = (f"k.startsWith({_OWN})" if own is None else f"k in {list(own)}") + "".join(
        f" || k == '{a}'" for a in allowed)
    return (f"{new}.all(k, {ours} || (k in {old} && {new}[k] == {old}[k])) && "
            f"{old}.all(k, {ours} || k in {new})")


def metadata_kept(row: Row) -> str:
    new, old = "dyn(object.metadata)", "dyn(oldObject.metadata)"
    free: dict[str, Tree | None] = {**_SERVER_SET, "annotations": None, "labels": None}
    if row.finalizers:
        free["finalizers"] = None
    parts = [same(new, old, free),
             keys_kept(_get(new, "annotations"), _get(old, "annotations"), row.annotations,
                       own=row.own_annotations),
             keys_kept(_get(new, "labels"), _get(old, "labels"), row.labels, own=row.own_labels)]
    if row.finalizers:
        parts.append(f"object.metadata.?finalizers.orValue([]).filter(f, f != '{FINALIZER_ROUTES}') == "
                     f"oldObject.metadata.?finalizers.orValue([]).filter(f, f != '{FINALIZER_ROUTES}')")
    return " && ".join(f"({p})" for p in parts)


def _is(row: Row) -> str:
    return (f"{GROUP} == '{row.group}' && request.resource.resource == '{row.resource}' && "
            f"{SUB} == '{row.subresource}'")


def _validation(expression: str, message: str) -> dict[str, str]:
    return {"expression": expression, "message": message, "reason": "Forbidden"}


def row_validation(row: Row) -> dict[str, str]:
    body = " && ".join(f"({p})" for p in [same("dyn(object)", "dyn(oldObject)", {"metadata": None, **row.spec}),
                                          metadata_kept(row), row.extra] if p)
    return _validation(f"request.operation != 'UPDATE' || !({_is(row)}) || ({body})", row.says)


def key_at(depth: int) -> str:
    """The name of a comprehension's key `depth` maps from the bottom: one name per depth, since an inner
    comprehension's variable hides an outer one of the same name (`new[k]` inside would read the inner key)."""
    return f"k{depth}"


def _numbers_only(new: str, old: str, depth: int) -> str:
    """CEL: maps `new` and `old` have the same keys and differ only in whole numbers, `depth` maps deep; a Pod
    template (`template`) never differs."""
    k = key_at(depth)
    same_value = f"{new}[{k}] == {old}[{k}] || (type({new}[{k}]) == int && type({old}[{k}]) == int)"
    if depth > 1:
        inner = _numbers_only(f"{new}[{k}]", f"{old}[{k}]", depth - 1)
        same_value += f" || ({k} != 'template' && type({new}[{k}]) == map && type({old}[{k}]) == map && {inner})"
    return f"({new}.all({k}, {k} in {old} && ({same_value})) && {old}.all({k}, {k} in {new}))"


def custom_validation(known: list[Row]) -> dict[str, str]:
    """Any other resource: Kubernetes' own are refused, and nsscaler's own API's (an NSScalerKind, whatever RBAC
    grants); a custom kind's (its group has a dot and is no `*.k8s.io`) may change only what a row can change
    (`devtools.row_admission.bounded_custom`: whole numbers and booleans of its spec, never a string, a list, a
    map or a Pod template, one annotation and one label not nsscaler's own); the kinds a team has an
    NSScalerKind for are held to exactly their row by the second policy (`devtools.row_admission.policy`)."""
    from devtools import row_admission  # noqa: PLC0415  (it builds on this module's words)

    listed = " || ".join(f"({_is(r)})" for r in known)
    custom = (f"!({GROUP} in {list(_CORE_GROUPS)}) && !{GROUP}.endsWith('k8s.io') "
              f"&& {GROUP} != '{OWN_GROUP}' && {SUB} == ''")
    return _validation(
        f"request.operation != 'UPDATE' || {listed} || ({custom} && {row_admission.bounded_custom()})",
        "nsscaler updates only the kinds it freezes, the routes, its own statuses and Lease; on a custom kind "
        "only whole numbers and booleans of its spec (never a string, a list or a Pod template), one annotation and "
        f"one label besides its own ({DOMAIN}/...)")


def request_validations() -> list[dict[str, str]]:
    """What needs no object: where a run writes, and which objects it creates and deletes."""
    grants = f"{GROUP} == '{hr.GROUP}' && request.resource.resource == '{hr.GRANT_PLURAL}'"
    lease = (f"{GROUP} == 'coordination.k8s.io' && request.resource.resource == 'leases' && "
             f"{OBJ} == '{LEASE}'")
    events = f"request.resource.resource == 'events' && {GROUP} in ['', 'events.k8s.io']"
    reviews = (f"{GROUP} in ['authorization.k8s.io', 'authentication.k8s.io'] && "
               "request.resource.resource.startsWith('self')")
    to_waker = f"object.spec.to.all(t, t.kind == 'Service' && t.name == '{WAKER_SERVICE}')"
    # `nsscaler release` (job/cluster/own_cronjob.py): its own CronJob suspended and marked released, never the
    # other way (the cronjobs row keeps every other field as it was)
    released = (f"request.operation == 'UPDATE' && {GROUP} == 'batch' && request.resource.resource == 'cronjobs' "
                f"&& {SUB} == '' && {OBJ} == '{OWN_CRONJOB}' && object.spec.?suspend.orValue(false) == true "
                f"&& '{ANNOTATION_RELEASED}' in object.metadata.?annotations.orValue({{}})")
    return [
        _validation("request.operation != 'CONNECT'", "nsscaler never connects to a Pod (exec, attach, port-forward)"),
        _validation(f"{NS} != 'kube-system'", "nsscaler writes nothing in kube-system"),
        _validation(f"{NS} != {OWN} || ({lease}) || ({events}) || ({grants}) || ({released})",
                    f"in its own namespace nsscaler writes only its Lease {LEASE}, Events, ReferenceGrants for the "
                    f"waker, and its CronJob {OWN_CRONJOB} suspended and marked {ANNOTATION_RELEASED} (a release)"),
        _validation(f"request.operation != 'CREATE' || ({events}) || ({reviews}) || "
                    f"(({lease}) && {NS} == {OWN}) || "
                    f"(({grants}) && {NS} == {OWN} && {to_waker})",
                    "nsscaler creates only Events, its run Lease, ReferenceGrants to the waker and access reviews: "
                    "no Pod, no Job, nothing else"),
        _validation(f"request.operation != 'DELETE' || (({grants}) && {NS} == {OWN})",
                    "nsscaler deletes only the waker's ReferenceGrants"),
    ]


def policy() -> list[dict[str, Any]]:
    rows = [*workload_rows(), *other_rows()]
    validations = [*request_validations(), *(row_validation(r) for r in rows), custom_validation(rows)]
    spec = {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                    "operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"],
                                                    "resources": ["*/*"], "scope": "*"}]},
            "matchConditions": [{"name": "nsscaler-itself", "expression": MATCH}],
            "validations": validations}
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": NAME}, "spec": spec},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": {"name": NAME}, "spec": {"policyName": NAME, "validationActions": ["Deny"]}}]


_HEADER = """\
# Generated by `make admission` (devtools/admission.py) from the kind registry: edit that, not this file.
# nsscaler's own ServiceAccount may only freeze, restore and record: the API server refuses any write of it that
# changes more than a run changes (the fields each kind's freeze sets, its own annotations and labels, the routes
# to and from the waker, its statuses, its Lease, Events and ReferenceGrants), anything in kube-system, any Pod,
# any Job it would create. Nobody else's requests are matched.
"""


def rendered() -> str:
    from devtools import row_admission  # noqa: PLC0415  (it builds on this module's words)

    return _HEADER + yaml.safe_dump_all([*policy(), *row_admission.policy()], sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is not what the registry makes")
    args = parser.parse_args(argv)
    # here, not at the top: the hold's policy builds on this module's words (GROUP, SUB), so it imports this one
    from devtools import hold_admission  # noqa: PLC0415

    stale = 0
    for output, text in ((OUTPUT, rendered()), (hold_admission.OUTPUT, hold_admission.rendered())):
        if not args.check:
            output.write_text(text)
        elif not output.exists() or output.read_text() != text:
            print(f"{output.relative_to(ROOT)} is stale: run `make admission`", file=sys.stderr)
            stale = 1
    return stale


if __name__ == "__main__":
    sys.exit(main())
