"""The admission rules for the kinds a platform team adds as rows (`NSScalerKind`), written into
`kustomize/base/run-admission.yaml` beside the rules `devtools.admission` renders from the registry.

A team's rows are known only at run time, so they cannot be rendered into the policy the way the catalogue's
are. Two rules together keep nsscaler's own ServiceAccount to what such a row writes:

1. `bounded_custom`, in the run policy itself, for any custom kind the catalogue does not list: the spec may
   change only in whole numbers and booleans, at any depth rule 2 follows (never a string, a Pod template, a
   list or a map replaced), at most one annotation and at most one label not nsscaler's own may change, and
   nothing else of the object. That is the most a row the run admission lets through can write (a `scale`
   row: numbers; `field`: one number or boolean under spec; `annotation` and `pause`: one annotation or one
   label). A `field` row frozen to a string cannot pass it: a team freezes by a number, a boolean or an
   annotation instead (docs/operating/custom-kinds.md). What is left to a stolen token on a custom kind
   without an NSScalerKind object: its numbers and booleans, one annotation and one label.
2. `policy()`: a second policy whose parameters are the NSScalerKind objects themselves (`paramKind`), each
   evaluated on its own and all of them required (the API server ANDs them). The one naming the request's kind
   lets exactly its row's change through: its path under spec, its annotation key, its label key, or whole
   numbers for a `scale` row, and nothing else. A stolen token cannot change a Pod template, another field,
   another annotation or another label of a kind a team has a row for, whatever it writes alongside.

What a team's row given only in a `--kind-rows` file (no NSScalerKind object) gets is rule 1 alone: the
admission cannot read a file. docs/operating/custom-kinds.md says so and advises an NSScalerKind object.
"""

from __future__ import annotations

from typing import Any

from devtools import admission as run
from job.model.kinds.catalogue import CATALOGUE
from job.model.kinds.rows import KIND_API_VERSION
from job.model.marks import DOMAIN

NAME = "nsscaler-run-writes-only-what-a-row-writes"
#: what the API server does while the policy cannot be used (its NSScalerKind CRD not served yet, at install):
#: lets the request by, where Fail would refuse every update of every namespaced object in the cluster; rule 1,
#: in the run policy (Fail), still bounds nsscaler's account meanwhile
FAILURE = "Ignore"
#: how deep a row's `field` path is followed (spec.a.b.c); a deeper row's write is refused (the run's dry run of
#: the row names it once), never let through unchecked
DEPTH = 4
_NEW, _OLD = "dyn(object)", "dyn(oldObject)"
_OWN = f"'{DOMAIN}/'"
#: the parts of an NSScalerKind (the parameter) that both policies reading rows need, this one and the team rows'
#: hold (`devtools.team_hold`): its kind's group and name, and how it freezes
ROW_PARTS = [
    {"name": "rowGroup", "expression": "params.spec.kind.substring(params.spec.kind.indexOf('.') + 1)"},
    {"name": "rowKind", "expression": "params.spec.kind.split('.')[0]"},
    {"name": "method", "expression": "params.spec.freeze.method"},
    {"name": "key", "expression": "params.spec.freeze.?key.orValue('')"},
    {"name": "marker", "expression": "params.spec.freeze.?marker.orValue('annotation')"},
]
#: the parameter's parts, read once (`variables`)
VARIABLES = [
    *ROW_PARTS,
    {"name": "path", "expression": "params.spec.freeze.?path.orValue('spec').split('.')"},
    {"name": "newSpec", "expression": run._get(_NEW, "spec")},
    {"name": "oldSpec", "expression": run._get(_OLD, "spec")},
    {"name": "newAnnotations", "expression": run._get(run._get(_NEW, "metadata"), "annotations")},
    {"name": "oldAnnotations", "expression": run._get(run._get(_OLD, "metadata"), "annotations")},
    {"name": "newLabels", "expression": run._get(run._get(_NEW, "metadata"), "labels")},
    {"name": "oldLabels", "expression": run._get(run._get(_OLD, "metadata"), "labels")},
]
#: the request is of the parameter's kind
MINE = "request.kind.group == variables.rowGroup && request.kind.kind == variables.rowKind"


def _scalar(value: str) -> str:
    """CEL: `value` is a single value (or null), not a map or a list."""
    return f"(type({value}) != map && type({value}) != list)"


def foreign_changes(new: str, old: str) -> str:
    """CEL: how many keys not nsscaler's own differ between the maps `new` and `old`."""
    return (f"({new}.filter(k, !k.startsWith({_OWN}) && (!(k in {old}) || {new}[k] != {old}[k])).size() + "
            f"{old}.filter(k, !k.startsWith({_OWN}) && !(k in {new})).size())")


def _settable(value: str) -> str:
    """CEL: `value` is what rule 1 lets a run set, change or remove in a spec: a whole number or a boolean (a
    string could be an image, a URL, a selector's value)."""
    return f"(type({value}) == int || type({value}) == bool)"


def _values_only(new: str, old: str, depth: int) -> str:
    """CEL: maps `new` and `old` differ only in whole numbers and booleans (set, changed or removed), `depth`
    maps deep; a Pod template (`template`) never differs, nor a string, a list or a map replaced. Each level's
    test is written once, so the expression grows with the depth, not twice per level; each level's key has its
    own name (`devtools.admission.key_at`)."""
    k = run.key_at(depth)
    changed = f"{_settable(f'{new}[{k}]')} && {_settable(f'{old}[{k}]')}"
    if depth > 1:
        changed = (f"({changed}) || (type({new}[{k}]) == map && type({old}[{k}]) == map && "
                   f"{_values_only(f'{new}[{k}]', f'{old}[{k}]', depth - 1)})")
    return (f"({new}.all({k}, {k} in {old} ? ({new}[{k}] == {old}[{k}] || ({k} != 'template' && ({changed}))) : "
            f"({k} != 'template' && {_settable(f'{new}[{k}]')})) && "
            f"{old}.all({k}, {k} in {new} || ({k} != 'template' && {_settable(f'{old}[{k}]')})))")


def bounded_custom() -> str:
    """CEL, rule 1: the most a row can change on an object of a custom kind."""
    new_meta, old_meta = run._get(_NEW, "metadata"), run._get(_OLD, "metadata")
    parts = [run.same(_NEW, _OLD, {"metadata": None, "spec": None}),
             run.same(new_meta, old_meta, {**run._SERVER_SET, "annotations": None, "labels": None}),
             f"{foreign_changes(run._get(new_meta, 'annotations'), run._get(old_meta, 'annotations'))} <= 1",
             f"{foreign_changes(run._get(new_meta, 'labels'), run._get(old_meta, 'labels'))} <= 1",
             _values_only(run._get(_NEW, "spec"), run._get(_OLD, "spec"), DEPTH)]
    return " && ".join(f"({p})" for p in parts)


def _keys_kept_but(new: str, old: str, key: str) -> str:
    """CEL: maps `new` and `old` differ only in nsscaler's own keys and the key `key` (an expression)."""
    ours = f"k.startsWith({_OWN}) || k == {key}"
    return f"{new}.all(k, {ours} || (k in {old} && {new}[k] == {old}[k])) && {old}.all(k, {ours} || k in {new})"


def _spec_but_path(new: str, old: str, level: int) -> str:
    """CEL: maps `new` and `old` (at `variables.path[:level]`) are equal but on `variables.path`, where the last
    step is a single value on both sides."""
    step = f"variables.path[{level}]"
    last = (f"variables.path.size() == {level + 1} && (!({step} in {new}) || {_scalar(f'{new}[{step}]')}) && "
            f"(!({step} in {old}) || {_scalar(f'{old}[{step}]')})")
    deeper = "false"
    if level + 1 < DEPTH:
        inner = _spec_but_path(f"{new}[{step}]", f"{old}[{step}]", level + 1)
        deeper = (f"variables.path.size() > {level + 1} && {step} in {new} && {step} in {old} && "
                  f"type({new}[{step}]) == map && type({old}[{step}]) == map && {inner}")
    others = (f"{new}.all(k, k == {step} || (k in {old} && {new}[k] == {old}[k])) && "
              f"{old}.all(k, k == {step} || k in {new})")
    return f"({others} && {step} != 'template' && (({last}) || ({deeper})))"


def exactly_the_row() -> str:
    """CEL, rule 2, for a parameter naming the request's kind: the change is its row's and nothing else."""
    new_meta, old_meta = run._get(_NEW, "metadata"), run._get(_OLD, "metadata")
    annotations = ["variables.newAnnotations", "variables.oldAnnotations"]
    labels = ["variables.newLabels", "variables.oldLabels"]
    spec = ["variables.newSpec", "variables.oldSpec"]
    by_annotation = "(variables.method == 'annotation' || (variables.method == 'pause' && " \
                    "variables.marker == 'annotation'))"
    by_label = "(variables.method == 'pause' && variables.marker == 'label')"
    none = "''"  # no key is this: only nsscaler's own keys may change
    parts = [run.same(_NEW, _OLD, {"metadata": None, "spec": None}),
             run.same(new_meta, old_meta, {**run._SERVER_SET, "annotations": None, "labels": None}),
             _keys_kept_but(*annotations, f"({by_annotation} ? variables.key : {none})"),
             _keys_kept_but(*labels, f"({by_label} ? variables.key : {none})"),
             f"variables.method != 'scale' || {run._numbers_only(*spec, 3)}",
             f"variables.method != 'field' || (variables.path[0] == 'spec' && {_spec_but_path(*spec, 1)})",
             f"variables.method == 'scale' || variables.method == 'field' || {spec[0]} == {spec[1]}"]
    return " && ".join(f"({p})" for p in parts)


def match_conditions() -> list[dict[str, str]]:
    """Only nsscaler's own updates of an object of a custom kind the catalogue does not list: nothing else waits
    for the NSScalerKind objects to be read."""
    listed = [f"(request.kind.group == '{row.kind.group}' && request.kind.kind == '{row.kind.short}')"
              for row in CATALOGUE]
    return [{"name": "nsscaler-itself", "expression": run.MATCH},
            {"name": "an-update-of-a-custom-kind",
             "expression": f"request.operation == 'UPDATE' && {run.SUB} == '' && "
                           f"!({run.GROUP} in {list(run._CORE_GROUPS)}) && !{run.GROUP}.endsWith('k8s.io') && "
                           f"{run.GROUP} != 'operators.wubw.fun' && !({' || '.join(listed)})"}]


def policy() -> list[dict[str, Any]]:
    spec = {"failurePolicy": FAILURE,
            "paramKind": {"apiVersion": KIND_API_VERSION, "kind": "NSScalerKind"},
            "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                    "operations": ["UPDATE"], "resources": ["*"],
                                                    "scope": "Namespaced"}]},
            "matchConditions": match_conditions(),
            "variables": VARIABLES,
            "validations": [{
                "expression": f"!({MINE}) || ({exactly_the_row()})",
                "messageExpression": "'on a ' + params.spec.kind + ' nsscaler may change only what the row of "
                                     "NSScalerKind ' + params.metadata.name + ' freezes (' + variables.method + "
                                     "(variables.key != '' ? ' ' + variables.key : '') + "
                                     "(variables.method == 'field' ? ' ' + params.spec.freeze.path : '') + "
                                     f"') and its own annotations and labels ({DOMAIN}/...)'",
                "reason": "Forbidden"}]}
    binding = {"policyName": NAME, "validationActions": ["Deny"],
               "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"}}
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": NAME}, "spec": spec},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": {"name": NAME}, "spec": binding}]
