"""A kind as a row of data (`Row`): where it lives, how it is frozen and given back, how to tell it is frozen and
ready, what must hold before freezing it, its default restore tier and the RBAC verbs a run needs on it.

The same schema serves the shipped catalogue (`job.model.kinds.catalogue`) and the rows a platform team adds
without code (`--kind-rows`, a file or a mounted ConfigMap): `parse_rows` validates each row on its own, so a bad
row is one line naming it and the reason, and the others are served. A row becomes a handler only against the
kind's CRD (`Row.handler`): a row whose CRD is not served, or serves none of its versions, is inactive.

Four ways to freeze, the vocabulary of the catalogue:
- `scale`: the replica field to 0 (the CRD's `specReplicasPath`, or `path`); the record is the count before;
- `field`: a spec field set to `value` (`spec.numberOfInstances: 0`, `spec.pause: true`);
- `annotation`: an annotation the operator owns set to `value` (`cnpg.io/hibernation: "on"`);
- `pause`: the operator paused by an annotation or a label (`marker`) set to `value` on its object, then the
  StatefulSets it controls scaled to 0 as any StatefulSet is (each with its own record); given back in reverse:
  the StatefulSets first, then the marker (`job.decide.decision` orders the writes).
For `field`, `annotation` and `pause` the record is the value before, as JSON (`null`: absent), so the restore
gives back exactly that value or removes it.

The built-in kinds are rows too (`job.model.kinds.builtin`), validated by `BuiltinRow`: the same vocabulary
(`freeze.method: scale`, `plural`, `tier`, `note`) extended by what only a built-in kind has (two more ways to
freeze, `suspend` and `nodeSelector`, a guard, whose selection freezes it, whether the census follows it). A row
here can never claim a built-in kind: `Row` refuses a bare kind, and a built-in kind written with its group.
Values only: nothing here calls the API.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from job.errors import shown
from job.model.kinds.builtin import BUILTIN_DATA, BUILTIN_NAMES
from job.model.kinds.kind import Kind

_PATH = re.compile(r"(spec|status|metadata)(\.[A-Za-z0-9_-]+)+")
_ANNOTATION_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_VERSION = re.compile(r"v[0-9]+((alpha|beta)[0-9]+)?")
#: what every row needs: LIST (metadata) and GET (whole objects) to read, PATCH to freeze and give back
VERBS = ("list", "get", "patch")
Scalar = str | int | float | bool


def dotted(text: str) -> tuple[str, ...]:
    return tuple(text.split("."))


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Freeze(_Strict):
    """How one object is frozen. `path` (scale, field) is dotted under `spec`; `key` names an annotation."""

    method: Literal["scale", "field", "annotation", "pause"]
    path: str | None = Field(default=None, description="scale: the replica field (default: the CRD's "
                                                       "specReplicasPath); field: the field to set")
    key: str | None = Field(default=None, description="annotation, pause: the annotation's (or label's) key")
    value: Scalar | None = Field(default=None, description="field, annotation, pause: the value that means "
                                                           "frozen (paused)")
    marker: Literal["annotation", "label"] = Field(default="annotation", description="pause: whether the "
                                                   "operator reads an annotation or a label")

    @model_validator(mode="after")
    def _complete(self) -> Freeze:
        if self.path is not None and not (_PATH.fullmatch(self.path) and self.path.startswith("spec.")):
            raise ValueError(f"freeze.path {self.path!r} is not a dotted path under spec (spec.replicas)")
        if self.method == "field" and (self.path is None or self.value is None):
            raise ValueError("freeze by field needs path and value")
        if self.method in ("annotation", "pause"):
            if self.key is None or not _ANNOTATION_KEY.fullmatch(self.key) or not isinstance(self.value, str):
                raise ValueError(f"freeze by {self.method} needs key (an annotation or label key) and value "
                                 f"(a string)")
            if self.key.startswith("nsscaler.wubw.fun/"):
                raise ValueError(f"freeze by {self.method} cannot use nsscaler's own annotations and labels")
        if self.method == "pause" and self.marker == "label" and not _LABEL_VALUE.fullmatch(str(self.value)):
            raise ValueError(f"freeze by pause: {self.value!r} is not a label value")
        if self.method != "pause" and self.marker != "annotation":
            raise ValueError("marker is for freeze by pause only")
        if self.method == "scale" and self.value is not None:
            raise ValueError("freeze by scale sets the replica field to 0: no value")
        return self

    @property
    def where(self) -> tuple[str, ...]:
        """Where in the object the freeze writes (scale: known from the CRD, so empty here)."""
        if self.method == "annotation" or (self.method == "pause" and self.marker == "annotation"):
            return ("metadata", "annotations", str(self.key))
        if self.method == "pause":
            return ("metadata", "labels", str(self.key))
        return dotted(self.path) if self.path else ()


class Condition(_Strict):
    """A condition the operator sets in `status.conditions` (metav1.Condition shape)."""

    type: str = Field(min_length=1)
    status: Literal["True", "False", "Unknown"] = "True"
    reason: str | None = None


class Frozen(_Strict):
    """How to tell an object is frozen: its Pods gone (the Pod census), or besides them the operator's own
    condition, reported when it does not come within `within` seconds."""

    condition: Condition | None = None
    within: float = Field(default=600, gt=0, le=86400)


class Compare(_Strict):
    """`path` equals `equals`, or (`at_least`) is a number at least the number at that other path."""

    path: str = Field(pattern=_PATH.pattern)
    equals: Scalar | None = None
    at_least: str | None = Field(default=None, alias="atLeast", pattern=_PATH.pattern)

    @model_validator(mode="after")
    def _one(self) -> Compare:
        if (self.equals is None) == (self.at_least is None):
            raise ValueError(f"{self.path}: give exactly one of equals, atLeast")
        return self


class Row(_Strict):
    """One kind nsscaler can freeze, as data."""

    kind: Kind = Field(description="<Kind>.<group>, as spec.kinds names it")
    plural: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                               description="its resource name (the CRD's names.plural): what its RBAC names")
    versions: tuple[str, ...] = Field(min_length=1, description="the API versions it was checked against, "
                                                                "preferred first")
    freeze: Freeze
    frozen: Frozen = Frozen()
    precondition: Compare | None = Field(default=None, description="what must hold before a freeze (else the "
                                                                   "object is left running and reported)")
    ready: Compare | None = Field(default=None, description="when a restored object is ready, for a later "
                                                            "restore tier (default: at once)")
    tier: Literal["data", "app"] = Field(default="app", description="data: given back before the apps")
    source: str = Field(default="", description="where its behaviour is documented")
    checked: tuple[str, ...] = Field(default=(), description="operator versions it was checked against")
    note: str = ""

    @model_validator(mode="after")
    def _custom(self) -> Row:
        if not self.kind.group:
            raise ValueError(f"{self.kind} is built in ({', '.join(BUILTIN_NAMES)}): a row names <Kind>.<group>")
        if any(self.kind.short == b["kind"] and self.kind.group == b["group"] for b in BUILTIN_DATA):
            raise ValueError(f"{self.kind} is built in: its row is nsscaler's own (job/model/kinds/builtin.py)")
        bad = [v for v in self.versions if not _VERSION.fullmatch(v)]
        if bad:
            raise ValueError(f"versions {bad} are not API versions (v1, v1beta2)")
        return self

    @property
    def verbs(self) -> tuple[str, ...]:
        return VERBS


class BuiltinFreeze(_Strict):
    """How a built-in kind is frozen: `scale` as a catalogue row's (its `spec.replicas`), or one of the two ways
    only built-in kinds have (`job.model.kinds.builtin`)."""

    method: Literal["scale", "suspend", "nodeSelector"]


class BuiltinRow(_Strict):
    """One built-in kind, as data (`job.model.kinds.builtin.BUILTIN_DATA`): `Row`'s vocabulary where it fits,
    extended by the facts only a built-in kind has. Becomes its handler in `job.model.kinds.registry`."""

    kind: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$", description="bare, as spec.kinds names it")
    group: str = Field(pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$", description="its API group ('': core)")
    version: str = Field(pattern=_VERSION.pattern)
    plural: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    freeze: BuiltinFreeze
    guard: Literal["claimsKept"] | None = Field(default=None, description="scale: a field set in the same write "
                                                                          "so that the freeze deletes nothing")
    pods: Literal["template", "jobTemplate", "parallelism"] = Field(
        default="template", description="where one unit's Pods are (suspend: jobTemplate or parallelism)")
    finishes: bool = Field(default=False, description="suspend: a finished object is not running")
    owner_selects: tuple[str, ...] = Field(default=(), alias="ownerSelects")
    freezes_controlled: bool = Field(default=False, alias="freezesControlled")
    followed: bool = False
    tier: Literal["data", "app"] = "app"
    note: str = ""

    @model_validator(mode="after")
    def _fits(self) -> BuiltinRow:
        suspended = self.freeze.method == "suspend"
        if self.guard is not None and self.freeze.method != "scale":
            raise ValueError(f"{self.kind}: a guard is for freeze by scale only")
        if suspended != (self.pods != "template"):
            raise ValueError(f"{self.kind}: pods {self.pods!r} does not fit freeze by {self.freeze.method} (suspend: "
                             f"jobTemplate or parallelism; else template)")
        if self.finishes and not suspended:
            raise ValueError(f"{self.kind}: finishes is for freeze by suspend only")
        return self

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def parse_builtin_rows(items: Iterable[Mapping[str, Any]]) -> tuple[BuiltinRow, ...]:
    """The built-in rows, validated. Raises ValueError naming the bad row: they ship with nsscaler, and a unit
    test keeps a bad one from shipping."""
    rows: list[BuiltinRow] = []
    for index, item in enumerate(items):
        try:
            row = BuiltinRow.model_validate(item)
        except ValidationError as exc:
            raise ValueError(f"job/model/kinds/builtin.py: {_name_of(item, index)}: {_reason(exc)}") from None
        if any(r.kind == row.kind for r in rows):
            raise ValueError(f"job/model/kinds/builtin.py: {_name_of(item, index)}: {row.kind} has a row already")
        rows.append(row)
    names = {r.kind for r in rows}
    for row in rows:
        unknown = sorted(set(row.owner_selects) - names)
        if unknown:
            raise ValueError(f"job/model/kinds/builtin.py: {row.kind}: ownerSelects {unknown} are not built-in kinds")
    return tuple(rows)


def _name_of(item: Any, index: int) -> str:
    kind = item.get("kind") if isinstance(item, Mapping) else None
    return f"row {index + 1} ({kind})" if isinstance(kind, str) else f"row {index + 1}"


def _reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return "; ".join(parts)


def keep_first(rows: list[Row], row: Row, who: str, problems: list[str]) -> None:
    """Add `row` to `rows` unless its kind has a row there already: a kind named twice keeps its first row, and
    the one left out is named (`who`) in `problems`."""
    if any(r.kind == row.kind for r in rows):
        problems.append(f"{who} ignored: {row.kind} has a row already")
    else:
        rows.append(row)


def parse_rows(items: Any, *, origin: str) -> tuple[list[Row], list[str]]:
    """The valid rows of `items` (a list of mappings), and one line per bad row naming it and why. A kind named
    twice keeps its first row."""
    if not isinstance(items, list):
        return [], [f"{origin}: not a list of rows but {shown(str(type(items).__name__))}"]
    rows: list[Row] = []
    problems: list[str] = []
    for index, item in enumerate(items):
        try:
            row = Row.model_validate(item)
        except ValidationError as exc:
            problems.append(f"{origin}: {_name_of(item, index)} ignored: {_reason(exc)}")
            continue
        keep_first(rows, row, f"{origin}: {_name_of(item, index)}", problems)
    return rows, problems


def merged(first: Iterable[Row], then: Iterable[Row]) -> dict[Kind, Row]:
    """Rows by kind: those of `first` (a platform team's) win over those of `then` (the catalogue)."""
    out: dict[Kind, Row] = {}
    for row in [*first, *then]:
        out.setdefault(row.kind, row)
    return out


def read_rows(path: Path) -> tuple[list[Row], list[str]]:
    """The rows of a YAML file (a list of rows), or of every `*.yaml`, `*.yml` and `*.json` file of a directory
    (a mounted ConfigMap), in name order; and one line per bad row or unreadable file. Never raises."""
    files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json") and p.is_file()) \
        if path.is_dir() else [path]
    rows: list[Row] = []
    problems: list[str] = []
    for file in files:
        try:
            items = yaml.safe_load(file.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            problems.append(f"kind rows {file}: not read: {shown(str(exc).splitlines()[0] if str(exc) else '')}")
            continue
        found, bad = parse_rows(items or [], origin=f"kind rows {file}")
        problems += bad
        for row in found:
            keep_first(rows, row, f"kind rows {file}: the row of {row.kind}", problems)
    return rows, problems


#: the NSScalerKind API: the rows a platform team adds as cluster-scoped objects (kustomize/base/kind-crd.yaml)
KIND_GROUP, KIND_VERSION, KIND_PLURAL = "operators.wubw.fun", "v1alpha1", "nsscalerkinds"
KIND_API_VERSION = f"{KIND_GROUP}/{KIND_VERSION}"
KIND_CRD_NAME = f"{KIND_PLURAL}.{KIND_GROUP}"


def serves_kind_rows(crd: Mapping[str, Any]) -> bool:
    """Whether `crd` is the NSScalerKind CRD and serves the version nsscaler reads."""
    spec = crd.get("spec") or {}
    return (crd.get("metadata") or {}).get("name") == KIND_CRD_NAME and any(
        v.get("name") == KIND_VERSION and v.get("served") for v in spec.get("versions") or [])


def rows_of_objects(objs: Iterable[Mapping[str, Any]]) -> tuple[list[Row], list[str]]:
    """The rows of NSScalerKind objects (each one's spec is a row), in name order, and one line per bad one naming
    it and why. Two objects for one kind: the first by name wins, and the other is named."""
    rows: list[Row] = []
    problems: list[str] = []
    for obj in sorted(objs, key=lambda o: str((o.get("metadata") or {}).get("name"))):
        name = (obj.get("metadata") or {}).get("name")
        found, bad = parse_rows([obj.get("spec")], origin=f"NSScalerKind {name}")
        problems += bad
        for row in found:
            keep_first(rows, row, f"NSScalerKind {name}:", problems)
    return rows, problems
