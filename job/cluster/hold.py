"""Writing the hold marks on Namespaces (`job.decide.hold` decides which): one merge PATCH each, logged.

A mark that cannot be written is a problem of the run (exit 1), never a reason to stop it: the workloads'
freezes and restores go on, and the next run writes the mark again (it compares with what the namespace carries)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from job.cluster.kube import Kube
from job.decide.hold import Mark
from job.errors import ApiError
from job.model.marks import ANNOTATION_EXCLUDE

log = logging.getLogger(__name__)


def write_marks(kube: Kube, marks: Sequence[Mark], *, dry_run: bool,
                holding: Callable[[], bool] = lambda: True) -> list[str]:
    """Each mark written (lifts first, as given) while `holding` (the run Lease) says this run may write; the
    problems, one line per mark that failed, one for those not sent."""
    problems = []
    for i, mark in enumerate(marks):
        if not holding():
            problems.append(f"{len(marks) - i} hold marks not written: this run may not write any more (the next "
                            f"run writes them)")
            break
        try:
            kube.patch(version="v1", plural="namespaces", namespace=None, name=mark.namespace, body=mark.body(),
                       dry_run=dry_run)
        except ApiError as exc:
            if exc.status == 404:  # gone since the LIST: nothing to hold
                continue
            problems.append(f"could not {'lift' if mark.lifted else 'write'} the hold mark of namespace "
                            f"{mark.namespace}: {exc}")
            log.error("%s", problems[-1], extra={"event": "hold", "namespace": mark.namespace, "outcome": "failed"})
            continue
        log.info("%s: hold %s", mark.namespace, mark.mode,
                 extra={"event": "hold", "namespace": mark.namespace, "hold": mark.mode})
        if mark.unheld:
            log.warning("%s: held, but its %s are not held between runs (no catalogue row and no NSScalerKind for "
                        "them: a row only in --kind-rows, or a plain /scale kind): anyone who may edit them can start "
                        "them again until the next run; give their rows as NSScalerKinds to hold them",
                        mark.namespace, ", ".join(mark.unheld),
                        extra={"event": "hold-unheld-kinds", "namespace": mark.namespace,
                               "kinds": list(mark.unheld)})
        if mark.left_out:
            log.warning("%s: %d workloads annotated %s are past the bound of the hold's list of them (%s ...): while "
                        "held they scale on the object (kubectl patch, apply), not through /scale (kubectl scale, "
                        "an HPA); fewer opted-out workloads in one namespace lift the bound", mark.namespace,
                        len(mark.left_out), ANNOTATION_EXCLUDE, ", ".join(mark.left_out[:3]),
                        extra={"event": "hold-excluded-bound", "namespace": mark.namespace,
                               "left_out": len(mark.left_out)})
    return problems
