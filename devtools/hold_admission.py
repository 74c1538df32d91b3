"""Generate the admission policy that keeps a held namespace held between runs, from the kind registry and the
shipped catalogue: `kustomize/base/hold-admission.yaml` (docs/operating/hold.md).

What would start Pods again is read from the same handlers that freeze (`job.model.kinds.BUILTIN`): each leaf of
a kind's freeze patch (`frozen_body`) is the field the hold guards; and from each catalogue row
(`job.model.kinds.catalogue`), the field its freeze sets (an annotation, a field, or the count behind its /scale,
where the operator's CRD the row was checked against keeps it). The frozen value says how:
- a count frozen at 0 (`spec.replicas`): it may not rise, on the object nor through its `/scale` subresource (kubectl
  scale, an HPA), and a new object may not start above 0 (absent counts as 1, the API server's default);
- a switch frozen on (`spec.suspend`): it may not be turned off, and a new object must be created with it on;
- a key of a map set to a value no node carries (a DaemonSet's own node-selector key): it may not go, and a new
  object must carry it.
On every kind: nsscaler's record (`nsscaler.wubw.fun/...` annotations it writes, the `scaled` label) may not be
removed or changed by hand; on a kind the holders freeze, the opt-out (`nsscaler.wubw.fun/exclude`) may not be
added, nor carried by a new object. A bare Pod may not be created.
Scale-downs, deletes and every other change pass.

Creating is checked for every kind that starts Pods, whatever the namespace's holders freeze. A change (UPDATE,
/scale) may start nothing from rest, whatever the kind and whether a run froze it or not (a count raised from 0,
an unsuspend, the key removed); on a kind the holders freeze (the `hold-kinds` mark) a count may not rise at all.
A workload of a kind the holders leave that runs already may grow (an HPA). An excluded workload's /scale is let
by through the names in the namespace's `hold-excluded` mark (a Scale carries no annotation).
A kind a platform team adds as an NSScalerKind (the chart's `kindRows` too) is held by a second policy in the
same file that reads the NSScalerKinds themselves (`devtools.team_hold`); any other custom kind, and a row given
only in a `--kind-rows` file, is not held between runs.

Who passes anyway: nsscaler's own ServiceAccount (its restores), the one the namespace's mark names (never
another ServiceAccount of the same name, which a namespace admin could make and bind), a cluster admin
(`system:masters`: trusted, and the way in when something goes wrong; a GitOps tool's ServiceAccount bound to
cluster-admin is not in that group, and is held), a change to a workload that was annotated
`nsscaler.wubw.fun/exclude=true` before the request (a new object's annotation counts for nothing), and the
cluster's built-in controllers making what they make (`MADE_BY`): sent by kube-controller-manager or a
ServiceAccount of kube-system, with a controller ownerReference of the kind that owns it (a Deployment's
ReplicaSet, a CronJob's Job, a Pod of a ReplicaSet, StatefulSet, DaemonSet, Job or ReplicationController); a
node, for mirror Pods only. An operator's or a GitOps tool's ServiceAccount is held like a person. A frozen owner
makes nothing; what an unfrozen owner (an excluded one, a kind the policy leaves) makes must come up.

The policy matches only namespaces carrying the hold mark (`job.decide.hold`); its two bindings choose by the
mark's value: "deny" refuses, "warn" admits with a warning and an audit annotation.

`python -m devtools.admission` writes it with the run's policy (`make admission`); `--check` fails when stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from devtools.admission import GROUP, ROOT, SUB
from job.model.kinds import BUILTIN
from job.model.kinds.catalogue import CATALOGUE
from job.model.kinds.rows import Row, dotted
from job.model.marks import (
    ANNOTATION_EXCLUDE,
    ANNOTATION_HOLD,
    ANNOTATION_HOLD_ACCOUNT,
    ANNOTATION_HOLD_EXCLUDED,
    ANNOTATION_HOLD_KINDS,
    ANNOTATION_RESTORE_TIER,
    DOMAIN,
    HOLD_MODES,
    LABEL_HOLD,
    LABEL_SCALED,
)

OUTPUT = ROOT / "kustomize" / "base" / "hold-admission.yaml"
#: the operators' CRDs the catalogue's rows were checked against (job/model/kinds/catalogue.py)
CRDS = ROOT / "tests" / "fixtures" / "crds"
NAME = "nsscaler-hold"
#: the binding per mode of `spec.hold`, and what the API server does with a request that fails
MODES = dict(zip(HOLD_MODES, (["Deny"], ["Warn", "Audit"]), strict=True))
#: nsscaler.wubw.fun annotations a person sets: not part of the record
USER_KEYS = (ANNOTATION_EXCLUDE, ANNOTATION_RESTORE_TIER)
#: cluster admins are trusted (docs/operating/security.md) and keep a way in that no mark closes: break-glass
MASTERS = "system:masters"
#: the label the API server sets on every Namespace, its name
NAME_LABEL = "kubernetes.io/metadata.name"
#: the API server's default of a count left out of a new object (`replicas`)
DEFAULT_COUNT = 1

RESOURCE = f"request.resource.resource + '.' + {GROUP}"
#: the opt-out as it was before the request: one added in the request itself frees nothing (UPDATE only; a new
#: object's annotation is not honoured while its namespace is held)
EXCLUDED = f"oldObject.metadata.?annotations[?'{ANNOTATION_EXCLUDE}'].orValue('') == 'true'"
ADDS_EXCLUDE = f"object.metadata.?annotations[?'{ANNOTATION_EXCLUDE}'].orValue('') == 'true'"
#: the built-in controllers' own identities: kube-controller-manager, or each controller's ServiceAccount in
#: kube-system (a namespace only cluster admins write). A ServiceAccount of any other namespace is a person's tool
CONTROLLERS = ("(request.userInfo.username == 'system:kube-controller-manager' || "
               "request.userInfo.username.startsWith('system:serviceaccount:kube-system:'))")
#: what a built-in controller makes, and the kinds (API group, kind) of owner that make it: a controller
#: ownerReference to any other kind (a ConfigMap, a custom kind) proves nothing
MADE_BY: Mapping[str, tuple[tuple[str, str], ...]] = {
    "replicasets.apps": (("apps", "Deployment"),),
    "jobs.batch": (("batch", "CronJob"),),
    "pods.": (("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("apps", "DaemonSet"), ("batch", "Job"),
              ("", "ReplicationController")),
}
#: a kubelet's mirror of a static Pod carries this annotation; a node is trusted for those only
MIRROR = "kubernetes.io/config.mirror"


def by_controller(resource: str) -> str:
    """CEL: `resource` made by the built-in controller that makes it, for a controller owner of the kind that
    really owns it ("false" for a kind no built-in controller makes)."""
    owners = MADE_BY.get(resource)
    if not owners:
        return "false"
    kinds = " || ".join(f"(r.kind == '{kind}' && " + (f"r.apiVersion.startsWith('{group}/'))" if group else
                                                       "r.apiVersion == 'v1')") for group, kind in owners)
    made = (f"({CONTROLLERS} && object.metadata.?ownerReferences.orValue([]).exists(r, "
            f"r.?controller.orValue(false) && ({kinds})))")
    if resource == "pods.":
        made += (f" || (request.userInfo.username.startsWith('system:node:') && "
                 f"object.metadata.?annotations[?'{MIRROR}'].hasValue())")
    return f"({made})"


@dataclass(frozen=True)
class Guarded:
    """One field a freeze sets on a kind: its resource, where it is, its frozen value, and whether its count is
    also sent through the kind's `/scale` subresource."""

    plural: str
    group: str
    path: tuple[str, ...]
    frozen: Any
    scaled: bool = False

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}"


def _leaves(body: Mapping[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = []
    for key, value in body.items():
        out += _leaves(value, (*path, key)) if isinstance(value, Mapping) else [((*path, key), value)]
    return out


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def guarded() -> list[Guarded]:
    """Every field a built-in kind's freeze sets, but its record (metadata), then each catalogue row's."""
    builtin = [Guarded(h.plural, h.group, path, value, scaled=_is_count(value)) for h in BUILTIN.values()
               for path, value in _leaves(h.frozen_body()) if path[0] != "metadata"]
    return [*builtin, *(_row_field(row) for row in CATALOGUE)]


def _row_field(row: Row) -> Guarded:
    """The field a shipped row's freeze sets: an annotation (a key whose value means frozen), a field (a count at
    0, or a switch), or the count behind its /scale (the CRD's specReplicasPath, as the row was checked)."""
    plural, group = str(row.plural), row.kind.group
    if row.freeze.method == "scale":
        return Guarded(plural, group, row.freeze.where or _replica_path(row), 0, scaled=True)
    return Guarded(plural, group, row.freeze.where, row.freeze.value)


def _replica_path(row: Row) -> tuple[str, ...]:
    """Where a row's /scale keeps its count on the object: the specReplicasPath of the CRD it was checked
    against (the operators' own CRDs, one file per kind: only the row's file is parsed)."""
    for path in sorted(CRDS.glob("*/*.yaml")):
        text = path.read_text()
        if f"plural: {row.plural}\n" not in text:
            continue
        for doc in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if doc and doc.get("kind") == "CustomResourceDefinition" and doc["spec"]["group"] == row.kind.group:
                for version in doc["spec"]["versions"]:
                    replicas = version.get("subresources", {}).get("scale", {}).get("specReplicasPath")
                    if version["name"] == row.versions[0] and replicas:
                        return dotted(replicas.lstrip("."))
    raise ValueError(f"row {row.kind}: no CRD under {CRDS} says where its /scale keeps its count")


def _at(obj: str, path: tuple[str, ...], default: str) -> str:
    """CEL: the field at `path` of `obj`, `default` where any part is missing."""
    parts = "".join(f".?{p}" if p.isidentifier() else f"[?'{p}']" for p in path)
    return f"{obj}{parts}.orValue({default})"


def _is(resources: list[str], *, sub: str = "") -> str:
    return f"{RESOURCE} in {resources} && {SUB} == '{sub}'"


def _validation(expression: str, message: str) -> dict[str, str]:
    return {"expression": expression, "messageExpression": message, "reason": "Forbidden"}


def _refused(words: str, after: str = "") -> str:
    """CEL: what a refused request reads: what it tried, then the namespace's own words (its mark)."""
    # double-quoted CEL literals: the words quote keys with single quotes
    return f'"{words} " + variables.target + "{after} is refused: " + variables.held'



def _free(g: Guarded) -> str:
    """CEL: an UPDATE of `g`'s kind the hold leaves whatever it changes: a workload excluded before the request,
    or its controller's write."""
    return f"{EXCLUDED} || {by_controller(g.resource)}"


def _stopped(g: Guarded, obj: str) -> str:
    """CEL: `obj` (as stored: "oldObject") starts no Pod by `g`'s field: a count at 0, a switch on, the key set."""
    if isinstance(g.frozen, bool):
        return f"{_at(obj, g.path, 'false')} == {'true' if g.frozen else 'false'}"
    if isinstance(g.frozen, int):
        return f"{_at(obj, g.path, str(DEFAULT_COUNT))} == 0"
    return f"{_at(obj, g.path, chr(39) * 2)} == '{g.frozen}'"


#: CEL: a count may rise on a kind none of the holders freezes only from above 0: it runs already, as the
#: policy leaves it (an HPA's scale-up); from 0 it would start Pods in a held namespace, as a new one would
RUNNING_ALREADY = "(!variables.frozenKind && {old} > 0)"


def count_rules(fields: list[Guarded]) -> list[dict[str, str]]:
    """A count frozen at 0 never rises: on the object, through /scale, in a new object."""
    out = []
    for g in fields:
        new, old = _at("object", g.path, str(DEFAULT_COUNT)), _at("oldObject", g.path, str(DEFAULT_COUNT))
        free, made = _free(g), by_controller(g.resource)
        out += [
            _validation(f"request.operation != 'UPDATE' || !({_is([g.resource])}) || {free} || {new} <= {old} || "
                        f"{RUNNING_ALREADY.format(old=old)}", _refused(f"raising {'.'.join(g.path)} of")),
            _validation(f"request.operation != 'CREATE' || !({_is([g.resource])}) || {made} || {new} == 0",
                        _refused("creating", f" with {'.'.join(g.path)} above 0")),
        ]
    scaled = sorted({g.resource for g in fields if g.scaled})
    # a Scale carries no annotation and no owner: the namespace's mark tells which workloads were excluded when
    # the run last wrote it (`hold-excluded`, which only nsscaler's account writes on a Namespace)
    old = "oldObject.spec.?replicas.orValue(0)"
    out.append(_validation(
        f"request.operation != 'UPDATE' || !({_is(scaled, sub='scale')}) || variables.excludedByName || "
        f"object.spec.?replicas.orValue(0) <= {old} || {RUNNING_ALREADY.format(old=old)}",
        _refused("scaling up", " (its scale subresource: kubectl scale, an HPA)")))
    return out


def switch_rules(fields: list[Guarded]) -> list[dict[str, str]]:
    """A switch frozen on is never turned off, and a new object starts with it on."""
    out = []
    for g in fields:
        frozen = "true" if g.frozen is True else "false"
        new, old = _at("object", g.path, "false"), _at("oldObject", g.path, "false")
        free, made = _free(g), by_controller(g.resource)
        out += [
            _validation(f"request.operation != 'UPDATE' || !({_is([g.resource])}) || {free} || "
                        f"{old} != {frozen} || {new} == {frozen}", _refused(f"turning off {'.'.join(g.path)} of")),
            _validation(f"request.operation != 'CREATE' || !({_is([g.resource])}) || {made} || {new} == {frozen}",
                        _refused("creating", f" without {'.'.join(g.path)}: {frozen} (it would start Pods)")),
        ]
    return out


def key_rules(fields: list[Guarded]) -> list[dict[str, str]]:
    """A key set to a value no node carries stays, and a new object carries it."""
    out = []
    for g in fields:
        new, old = _at("object", g.path, "''"), _at("oldObject", g.path, "''")
        free, made = _free(g), by_controller(g.resource)
        where = f"{'.'.join(g.path[:-1])}['{g.path[-1]}']"
        out += [
            _validation(f"request.operation != 'UPDATE' || !({_is([g.resource])}) || {free} || "
                        f"{old} != '{g.frozen}' || {new} == '{g.frozen}'", _refused(f"removing {where} of")),
            _validation(f"request.operation != 'CREATE' || !({_is([g.resource])}) || {made} || "
                        f"{new} == '{g.frozen}'",
                        _refused("creating", f" without {where}: {g.frozen} (it would start Pods)")),
        ]
    return out


def record_rule(resources: list[str]) -> dict[str, str]:
    """nsscaler's record stays as nsscaler wrote it: its label, and every annotation of its own but a person's."""
    ours = f"k.startsWith('{DOMAIN}/') && !(k in {list(USER_KEYS)})"
    new_ann, old_ann = "object.metadata.?annotations.orValue({})", "oldObject.metadata.?annotations.orValue({})"
    label, old_label = (_at(o, ("metadata", "labels", LABEL_SCALED), "''") for o in ("object", "oldObject"))
    kept = (f"{label} == 'true' && "
            f"{old_ann}.all(k, !({ours}) || (k in {new_ann} && {new_ann}[k] == {old_ann}[k]))")
    return _validation(
        f"request.operation != 'UPDATE' || !({_is(resources)}) || {EXCLUDED} || "
        f"{old_label} != 'true' || ({kept})",
        _refused(f"removing or changing the record of nsscaler ({DOMAIN}/... annotations, label {LABEL_SCALED}) of"))


def exclude_rule(fields: list[Guarded]) -> dict[str, str]:
    """The opt-out is not set while held, on a new object nor on an old one of a frozen kind or one that starts
    no Pod now (of any kind: at 0, suspended): with it, the next request would be free to start Pods. Set it once
    the namespace is woken. On a running workload of a kind the holders leave it changes nothing and passes. What
    a built-in controller makes passes (a Deployment's annotations are copied to its ReplicaSets)."""
    resources = sorted({g.resource for g in fields})
    made = " || ".join(f"({RESOURCE} == '{r}' && {by_controller(r)})" for r in MADE_BY if r in resources)
    stopped = " || ".join(f"({RESOURCE} == '{g.resource}' && {_stopped(g, 'oldObject')})" for g in fields)
    return _validation(
        f"!({_is(resources)}) || !({ADDS_EXCLUDE}) || (request.operation == 'UPDATE' && {EXCLUDED}) || {made} || "
        f"(request.operation == 'UPDATE' && !variables.frozenKind && !({stopped}))",
        _refused(f"setting {ANNOTATION_EXCLUDE}=true on", " while its namespace is held (wake it first)"))


def pod_rule() -> dict[str, str]:
    return _validation(f"request.operation != 'CREATE' || !({_is(['pods.'])}) || {by_controller('pods.')}",
                       _refused("creating the bare Pod", " (no controller of a running workload owns it)"))


def _rules(fields: list[Guarded]) -> list[dict[str, Any]]:
    # a resource the cluster does not serve (an operator's CRD not installed) matches no request: the policy
    # names every catalogue kind whether installed or not
    groups: dict[str, set[str]] = {}
    for g in fields:
        groups.setdefault(g.group, set()).add(g.plural)
        if g.scaled:
            groups[g.group].add(f"{g.plural}/scale")
    rules = [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
              "resources": sorted(plurals), "scope": "Namespaced"} for group, plurals in sorted(groups.items())]
    return [*rules, {"apiGroups": [""], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["pods"],
                     "scope": "Namespaced"}]


def policy() -> list[dict[str, Any]]:
    fields = guarded()
    counts = [g for g in fields if _is_count(g.frozen)]
    switches = [g for g in fields if isinstance(g.frozen, bool)]
    keys = [g for g in fields if isinstance(g.frozen, str)]
    assert len(counts) + len(switches) + len(keys) == len(fields), "a freeze of a new shape: teach the hold it"
    held = "namespaceObject.metadata.?annotations"
    variables = [
        # nsscaler's own account, as the mark names it: one ServiceAccount, never another of the same name
        {"name": "itself", "expression": f"request.userInfo.username == "
                                         f"{held}[?'{ANNOTATION_HOLD_ACCOUNT}'].orValue('')"},
        {"name": "held", "expression": f"{held}[?'{ANNOTATION_HOLD}'].orValue('namespace ' + request.namespace + "
                                       f"' is held by nsscaler')"},
        {"name": "frozenKind", "expression": f"{held}[?'{ANNOTATION_HOLD_KINDS}'].orValue('')"
                                             f".contains(' ' + {RESOURCE} + ' ')"},
        # the workloads excluded when the run last marked the namespace, as " deployments.apps/web ": what a
        # /scale request (no annotations) is checked against
        {"name": "excludedByName", "expression": f"{held}[?'{ANNOTATION_HOLD_EXCLUDED}'].orValue('')"
                                                 f".contains(' ' + {RESOURCE} + '/' + request.name + ' ')"},
        {"name": "target", "expression": "request.resource.resource + ' ' + (request.?name.orValue('') != '' ? "
                                         "request.name : object.metadata.?generateName.orValue(''))"},
    ]
    validations = [{**v, "expression": f"variables.itself || ({v['expression']})"} for v in [
        *count_rules(counts), *switch_rules(switches), *key_rules(keys),
        record_rule(sorted({g.resource for g in fields})), exclude_rule(fields),
        pod_rule()]]
    # kube-system is never held: the cluster's own controllers live there
    selector = {"matchExpressions": [{"key": LABEL_HOLD, "operator": "In", "values": sorted(MODES)},
                                     {"key": NAME_LABEL, "operator": "NotIn", "values": ["kube-system"]}]}
    spec = {"failurePolicy": "Fail",
            "matchConstraints": {"namespaceSelector": selector, "resourceRules": _rules(fields)},
            "matchConditions": [{"name": "not-a-cluster-admin",
                                 "expression": f"!('{MASTERS}' in request.userInfo.groups)"}],
            "variables": variables, "validations": validations}
    bindings = [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                 "metadata": {"name": f"{NAME}-{mode}"},
                 "spec": {"policyName": NAME, "validationActions": actions,
                          "matchResources": {"namespaceSelector": {"matchExpressions": [
                              {"key": LABEL_HOLD, "operator": "In", "values": [mode]}]}}}}
                for mode, actions in MODES.items()]
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": NAME}, "spec": spec}, *bindings]


_HEADER = """\
# Generated by `make admission` (devtools/hold_admission.py) from the kind registry: edit that, not this file.
# Held means held between runs too: in a namespace carrying nsscaler's hold mark (label nsscaler.wubw.fun/hold,
# written by a run only when the namespace's hold changes), the API server refuses what would start Pods there
# (a rising replica count, also through /scale; an unsuspend; a DaemonSet's frozen node selector removed; a new
# workload that runs; a bare Pod; nsscaler's record removed by hand), saying until when and how to wake it.
"""


def rendered() -> str:
    from devtools import team_hold  # noqa: PLC0415  (it builds on this module's rules)

    return _HEADER + yaml.safe_dump_all([*policy(), *team_hold.policy()], sort_keys=False, width=120)
