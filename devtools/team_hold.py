"""The hold between runs for the kinds a platform team adds as rows (`NSScalerKind`), written into
`kustomize/base/hold-admission.yaml` beside the hold `devtools.hold_admission` renders from the registry and the
catalogue (docs/operating/hold.md).

A team's rows are data the API server can read itself: this policy's parameters are the NSScalerKind objects
(`paramKind`), each evaluated on its own and all of them required (the API server ANDs them). The one naming
the request's kind holds that kind as its row freezes it, in a held namespace:
- `annotation`, `pause` (an annotation or a label) and a `field` frozen to a value that is not a count: once at
  the frozen value it stays there, and a new object must be created with it;
- a `field` frozen to a count (0), and a `scale` row's count (its `path`, where the row gives one), and the
  `/scale` subresource of either: a count at 0 may not rise, and a new object starts at 0 (absent counts as 1);
- nsscaler's record may not be removed or changed by hand, nor the opt-out added to an object at rest.
So the rows given as the chart's `kindRows` (rendered as NSScalerKinds) and those created at run time are held
alike, without nsscaler's account ever writing an admission policy. A row given only in a `--kind-rows` file is
not: the API server cannot read a file (docs/operating/custom-kinds.md says to create an NSScalerKind instead).

Who passes anyway, as in the hold: nsscaler's own account as the namespace's mark names it, a cluster admin
(`system:masters`), and an update of an object annotated `nsscaler.wubw.fun/exclude=true` before the request.
"""

from __future__ import annotations

from typing import Any

from devtools import hold_admission as hold
from devtools.admission import _CORE_GROUPS as CORE_GROUPS
from devtools.admission import GROUP, SUB
from devtools.row_admission import ROW_PARTS
from job.model.kinds.rows import KIND_API_VERSION
from job.model.marks import ANNOTATION_EXCLUDE, DOMAIN, LABEL_SCALED

NAME = "nsscaler-hold-team-rows"
#: what the API server does while the policy cannot be used (its NSScalerKind CRD not served yet, at install):
#: lets the request by, where Fail would refuse every write of a custom kind in every held namespace, cluster
#: admins' and nsscaler's own included (a policy's configuration is checked before its match conditions)
FAILURE = "Ignore"
#: how deep a row's path is followed (spec.a.b.c); a deeper one is not held (docs say so)
DEPTH = 4
_OBJ = {"new": "dyn(object)", "old": "dyn(oldObject)"}

VARIABLES = [
    *ROW_PARTS,
    {"name": "plural", "expression": "params.spec.?plural.orValue('')"},
    {"name": "path", "expression": "params.spec.freeze.?path.orValue('').split('.')"},
    # the frozen value: a scale row's is a count of 0
    {"name": "value", "expression": "params.spec.freeze.method == 'scale' ? dyn(0) : "
                                    "dyn(params.spec.freeze.?value.orValue(''))"},
    # by the resource's name, which a `/scale` request names too (its kind is Scale); the NSScalerKind CRD
    # requires `plural`: a row without one (an older object) is held on its own object alone
    {"name": "mine", "expression": "request.resource.?group.orValue('') == variables.rowGroup && "
                                   "(variables.plural != '' ? request.resource.resource == variables.plural : "
                                   f"({SUB} == '' && request.kind.kind == variables.rowKind))"},
    {"name": "counted", "expression": "variables.method == 'scale' || (variables.method == 'field' && "
                                      "type(variables.value) == int)"},
    {"name": "byAnnotation", "expression": "variables.method == 'annotation' || (variables.method == 'pause' && "
                                           "variables.marker == 'annotation')"},
    {"name": "byLabel", "expression": "variables.method == 'pause' && variables.marker == 'label'"},
]


def _field(obj: str) -> str:
    """CEL: the optional value at the row's path of `obj` (none where its path is missing or too deep)."""
    branches = []
    for size in range(2, DEPTH + 1):
        steps = "".join(f"[?variables.path[{i}]]" for i in range(1, size))
        branches.append(f"variables.path.size() == {size} ? {obj}.?spec{steps} : ")
    return "(" + "".join(branches) + "optional.none())"


def frozen_at(which: str) -> str:
    """CEL: the optional value the row's freeze sets, on the new or the old object."""
    obj = _OBJ[which]
    return (f"(variables.byAnnotation ? {obj}.metadata.?annotations[?variables.key] : "
            f"variables.byLabel ? {obj}.metadata.?labels[?variables.key] : {_field(obj)})")


def _count(which: str) -> str:
    return f"int({frozen_at(which)}.orValue({hold.DEFAULT_COUNT}))"


def at_rest(which: str) -> str:
    """CEL: the object starts no Pod by its row's freeze: its count at 0, or the frozen value in place."""
    guarded = "variables.path.size() > 1 || variables.byAnnotation || variables.byLabel"
    return (f"(variables.counted ? (!({guarded}) || {_count(which)} == 0) : "
            f"({frozen_at(which)}.hasValue() && {frozen_at(which)}.value() == variables.value))")


def _rule(expression: str, words: str, after: str = "") -> dict[str, str]:
    return {"expression": f"!variables.mine || variables.itself || ({expression})",
            "messageExpression": hold._refused(words, after), "reason": "Forbidden"}


def validations() -> list[dict[str, str]]:
    update, create = "request.operation == 'UPDATE'", "request.operation == 'CREATE'"
    on_object, on_scale = f"{SUB} == ''", f"{SUB} == 'scale'"
    rising = (f"variables.counted && ({_count('new')} <= {_count('old')} || {_count('old')} > 0)")
    kept = f"{at_rest('new')}"
    ours = f"k.startsWith('{DOMAIN}/') && !(k in {list(hold.USER_KEYS)})"
    new_ann, old_ann = "object.metadata.?annotations.orValue({})", "oldObject.metadata.?annotations.orValue({})"
    record = (f"object.metadata.?labels[?'{LABEL_SCALED}'].orValue('') == 'true' && "
              f"{old_ann}.all(k, !({ours}) || (k in {new_ann} && {new_ann}[k] == {old_ann}[k]))")
    return [
        _rule(f"!({update} && {on_object}) || {hold.EXCLUDED} || !({at_rest('old')}) || "
              f"(variables.counted ? ({rising}) : {kept})",
              "undoing the freeze of its row (" + '" + params.metadata.name + "' + ") on"),
        _rule(f"!({create}) || {at_rest('new')}",
              "creating", " without its row's freeze (" + '" + params.metadata.name + "' + ") in place"),
        _rule(f"!({update} && {on_scale}) || !variables.counted || variables.excludedByName || "
              f"object.spec.?replicas.orValue(0) <= oldObject.spec.?replicas.orValue(0) || "
              f"oldObject.spec.?replicas.orValue(0) > 0",
              "scaling up", " (its scale subresource: kubectl scale, an HPA)"),
        _rule(f"!({update} && {on_object}) || {hold.EXCLUDED} || "
              f"oldObject.metadata.?labels[?'{LABEL_SCALED}'].orValue('') != 'true' || ({record})",
              f"removing or changing the record of nsscaler ({DOMAIN}/... annotations, label {LABEL_SCALED}) of"),
        _rule(f"!({hold.ADDS_EXCLUDE}) || ({update} && ({hold.EXCLUDED} || !({at_rest('old')})))",
              f"setting {ANNOTATION_EXCLUDE}=true on", " while its namespace is held (wake it first)"),
    ]


def policy() -> list[dict[str, Any]]:
    """The policy and its two bindings (deny, warn), each reading every NSScalerKind."""
    base = hold.policy()[0]["spec"]
    selector = base["matchConstraints"]["namespaceSelector"]
    custom = (f"!({GROUP} in {list(CORE_GROUPS)}) && !{GROUP}.endsWith('k8s.io') && "
              f"{GROUP} != 'operators.wubw.fun' && ({SUB} == '' || {SUB} == 'scale')")
    spec = {"failurePolicy": FAILURE,
            "paramKind": {"apiVersion": KIND_API_VERSION, "kind": "NSScalerKind"},
            "matchConstraints": {"namespaceSelector": selector, "resourceRules": [
                {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["*", "*/scale"], "scope": "Namespaced"}]},
            "matchConditions": [*base["matchConditions"], {"name": "a-custom-kind", "expression": custom}],
            "variables": [*(v for v in base["variables"] if v["name"] in ("itself", "held", "excludedByName",
                                                                           "target")), *VARIABLES],
            "validations": validations()}
    bindings = [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                 "metadata": {"name": f"{NAME}-{mode}"},
                 "spec": {"policyName": NAME, "validationActions": actions,
                          "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
                          "matchResources": {"namespaceSelector": {"matchExpressions": [
                              {"key": hold.LABEL_HOLD, "operator": "In", "values": [mode]}]}}}}
                for mode, actions in hold.MODES.items()]
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": NAME}, "spec": spec}, *bindings]
