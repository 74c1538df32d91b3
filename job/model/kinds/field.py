"""The generic handler of a row frozen by setting one value (`job.model.kinds.rows`): a spec field
(`spec.numberOfInstances: 0`, `spec.pause: true`) or an annotation the operator owns (`cnpg.io/hibernation: "on"`).

Its size is 1 while the value differs from the frozen one and 0 once it is that value. The record
(`marks.ANNOTATION_ORIGINAL_VALUE`) is the value before, as JSON, `null` when it was absent; the restore writes
exactly that back in a merge patch, so an absent field or annotation is removed again. What must hold before a
freeze (`blocked`), when the operator reports it frozen (`settled`) and when it is ready again (`available`)
come from the row. Values only: nothing here calls the API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from job.errors import shown
from job.model.kinds.handler import Served, at, nested
from job.model.kinds.kind import MalformedRecord
from job.model.kinds.rows import Compare, Row, Scalar, dotted
from job.model.marks import ANNOTATION_ORIGINAL_VALUE


def holds(obj: dict[str, Any], test: Compare) -> bool:
    """Whether `test` holds on `obj`: a value equal to `equals`, or a number at least the one at `at_least`
    (missing numbers are 0, as the API server leaves zero counts out of a status)."""
    value = at(obj, dotted(test.path))
    if test.at_least is None:
        return bool(value == test.equals)
    floor = at(obj, dotted(test.at_least))
    number = value if isinstance(value, int) and not isinstance(value, bool) else 0
    return number >= (floor if isinstance(floor, int) and not isinstance(floor, bool) else 0)


@dataclass(frozen=True)
class FieldHandler(Served):
    """A kind frozen by one value at `where`, as its row says."""

    where: tuple[str, ...] = ()
    value: Scalar = 0
    row: Row | None = None
    record_key: str = ANNOTATION_ORIGINAL_VALUE

    @property
    def pauses_operator(self) -> bool:
        """Its freeze pauses an operator before the StatefulSets its object controls are scaled (`pause`)."""
        return self.row is not None and self.row.freeze.method == "pause"

    @property
    def pods_from_operator(self) -> bool:
        """Its operator makes its Pods; not a `pause` row's, whose StatefulSets are frozen, and counted, themselves."""
        return not self.pauses_operator

    def size_of(self, obj: dict[str, Any]) -> int:
        return 0 if at(obj, self.where) == self.value else 1

    def state_of(self, obj: dict[str, Any]) -> str | None:
        """The value a freeze replaces, as its record keeps it."""
        return json.dumps(at(obj, self.where))

    def blocked(self, obj: dict[str, Any]) -> str | None:
        """Why it may not be frozen now (its row's precondition), or None."""
        test = self.row.precondition if self.row else None
        if test is None or holds(obj, test):
            return None
        return (f"not frozen: its operator wants {test.path} to be {shown(str(test.equals))} first, and it is "
                f"{shown(str(at(obj, dotted(test.path))))}")

    @property
    def settle_within(self) -> float | None:
        """The seconds its row gives the operator to report it frozen (`frozen.within`), when it names a condition."""
        frozen = self.row.frozen if self.row else None
        return frozen.within if frozen is not None and frozen.condition is not None else None

    def settled(self, obj: dict[str, Any]) -> str | None:
        """None when the operator reports it frozen (its row's condition, if any); else what it reports."""
        wanted = self.row.frozen.condition if self.row else None
        if wanted is None:
            return None
        conditions = at(obj, ("status", "conditions"))
        found = next((c for c in conditions if isinstance(c, dict) and c.get("type") == wanted.type), None) \
            if isinstance(conditions, list) else None
        if found and found.get("status") == wanted.status and wanted.reason in (None, found.get("reason")):
            return None
        if found is None:
            return f"no condition {wanted.type} yet"
        return f"condition {wanted.type} is {found.get('status')} ({found.get('reason')}: {found.get('message', '')})"

    def available(self, obj: dict[str, Any]) -> bool:
        test = self.row.ready if self.row else None
        return test is None or holds(obj, test)

    def pod_template(self, obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
        return None, 0  # its operator makes its Pods: what it frees is counted from them, not from a template

    def frozen_body(self) -> dict[str, Any]:
        return nested(self.where, self.value)

    def original_value(self, size: int, state: str | None = None) -> str:
        return state if state is not None else "null"

    def _original(self, original: str) -> Any:
        try:
            value = json.loads(original)
        except ValueError:
            value = {}  # not JSON: reported below
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise MalformedRecord(f"{self.record_key}={shown(original)} is neither null nor a JSON string, number "
                                  f"or boolean")
        return value

    def restored_body(self, original: str) -> dict[str, Any]:
        return nested(self.where, self._original(original))

    def restored_size(self, original: str) -> int:
        return 0 if self._original(original) == self.value else 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("running" if size else "frozen")
