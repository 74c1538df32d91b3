"""Kinds frozen by a node selector no node matches: DaemonSets, which have no replica count to set to zero."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from job.errors import shown
from job.model.kinds.handler import Served, at, nested, observed, replica_template, status_of, whole
from job.model.kinds.kind import MalformedRecord
from job.model.marks import ANNOTATION_ORIGINAL_NODE_SELECTOR, FROZEN_NODE_LABEL

_TEMPLATE_SELECTOR = ("spec", "template", "spec", "nodeSelector")


@dataclass(frozen=True)
class NodeSelectorHandler(Served):
    """Frozen means its Pod template requires a node label no node carries (`FROZEN_NODE_LABEL`): the
    DaemonSet controller then removes its Pods from every node, and keeps none. The record is the template's
    `nodeSelector` before the freeze, as JSON (`null`: it had none), so the restore puts it back exactly."""

    record_key: str = ANNOTATION_ORIGINAL_NODE_SELECTOR

    def size_of(self, obj: dict[str, Any]) -> int:
        return 0 if FROZEN_NODE_LABEL in (_selector(obj) or {}) else 1

    def available(self, obj: dict[str, Any]) -> bool:
        """Every node that should run one of its Pods runs an available, up-to-date one."""
        status = status_of(obj)
        desired = whole(status.get("desiredNumberScheduled"))
        return (observed(obj) and whole(status.get("numberAvailable")) >= desired
                and whole(status.get("updatedNumberScheduled")) >= desired)

    def pod_template(self, obj: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
        return replica_template(obj)  # one unit: its Pod on one node

    def frozen_body(self) -> dict[str, Any]:
        return nested((*_TEMPLATE_SELECTOR, FROZEN_NODE_LABEL), "true")

    def state_of(self, obj: dict[str, Any]) -> str | None:
        return json.dumps(_selector(obj), sort_keys=True, separators=(",", ":"))

    def original_value(self, size: int, state: str | None = None) -> str:
        return state or "null"

    def restored_body(self, original: str) -> dict[str, Any]:
        try:
            selector = json.loads(original)
        except ValueError:
            selector = []  # not a map: reported below
        if selector is not None and not (isinstance(selector, dict)
                                         and all(isinstance(v, str) for v in selector.values())):
            raise MalformedRecord(f"{ANNOTATION_ORIGINAL_NODE_SELECTOR}={shown(original)} is neither null nor a JSON "
                                  f"object of strings")
        return nested(_TEMPLATE_SELECTOR, {**(selector or {}), FROZEN_NODE_LABEL: None})

    def restored_size(self, original: str) -> int:
        self.restored_body(original)
        return 1

    def describe(self, size: int | None) -> str:
        return "unknown" if size is None else ("on its nodes" if size else "off every node")


def _selector(obj: dict[str, Any]) -> dict[str, Any] | None:
    value = at(obj, _TEMPLATE_SELECTOR)
    return value if isinstance(value, dict) and value else None
