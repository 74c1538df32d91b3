"""How a run speaks: log lines (text or JSON), the summary line, the dry-run table, the JSON report."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import IO, Any, TextIO

from job import __version__
from job.decide import figures, syncs
from job.decide import freed as freed_api
from job.decide.actions import ActionResult, Verb
from job.decide.outcome import PolicyOutcome
from job.decide.selection import PolicySelection
from job.decide.status import (
    MAX_TOP_NAMESPACES,
    exception_entry,
    freed_entry,
    incomplete_entries,
    late_entries,
    remaining_entries,
    restoring_entries,
    reverted_entries,
    woken_entries,
)
from job.model.resources import format_quantity
from job.model.stamps import utc_stamp
from job.run import RunReport

_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line; fields passed with `extra=` become keys, so log pipelines can filter."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": utc_stamp(dt.datetime.fromtimestamp(record.created, dt.UTC), precision="microseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup_logging(*, log_format: str, level: str, stream: IO[str] | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter("%(asctime)s %(levelname)-7s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Third-party debug logs would print request URLs at best; they never get headers, but stay quiet.
    for noisy in ("urllib3", "pykube"):
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))


def summary(report: RunReport) -> tuple[str, dict[str, Any]]:
    """The one summary line of a run, and its fields for JSON logs."""
    seconds = ((report.finished or report.started) - report.started).total_seconds()
    fields: dict[str, Any] = {
        "event": "summary",
        "version": __version__,
        "policies": len(report.policies),
        "invalid": sum(1 for p in report.policies if p.invalid),
        "frozen": report.count("applied", Verb.FREEZE),
        "restored": report.count("applied", Verb.RESTORE),
        "planned": report.count("dry-run"),
        "failed": sum(p.failed for p in report.policies) + len(report.problems),
        "seconds": round(seconds, 3),
        "requests": report.requests,
        "throttled": report.throttled,
        "deferred": report.count("deferred"),
        "phases": report.phases,
        "phase_requests": report.phase_requests,
        "exit_code": report.exit_code,
        "dry_run": report.dry_run,
        "lease_held_by": report.lease_held_by,
        "lease_requests": report.lease_requests,
    }
    requests = " ".join(f"{verb}={n}" for verb, n in report.requests.items())
    if report.lease_held_by is not None:
        return (f"run wrote nothing: another run holds the run Lease ({report.lease_held_by}) and still did when "
                f"this run's wait ended; statuses and Events left as that run writes them; requests: "
                f"{requests or 'none'}; exit {report.exit_code}"), fields
    text = (f"nsscaler {__version__} run finished: {fields['policies']} policies ({fields['invalid']} invalid), "
            f"froze {fields['frozen']}, restored {fields['restored']}, dry-run {fields['planned']}, "
            f"failed {fields['failed']} in {seconds:.2f}s; requests: {requests or 'none'}"
            + (f" ({report.throttled} throttled, retried)" if report.throttled else "")
            + (f"; deferred {fields['deferred']} to the next run (soft deadline)" if fields["deferred"] else "")
            + f"; exit {report.exit_code}")
    return text, fields


def _columns(rows: list[tuple[str, ...]]) -> str:
    """kubectl-style columns; the last one is free text and not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "".join("   ".join(c.ljust(wd) for c, wd in zip(row, widths, strict=False)) + "   " + row[-1] + "\n"
                   for row in rows)


def namespace_table(report: RunReport) -> str:
    """Why each namespace a policy has in scope is held or kept running, policy by policy."""
    rows: list[tuple[str, ...]] = [("NAMESPACE", "POLICY", "WHY")]
    for p in report.policies:
        chosen = p.selection
        if chosen is None:
            continue
        if chosen.exception is not None or chosen.next_exception is not None:
            rows.append(("*", p.name, calendar_words(chosen)))
        if chosen.not_holding:
            rows.append(("*", p.name, chosen.reason("")))
            continue
        for ns in sorted({*p.held, *p.active, *p.kept_running_by, *chosen.recent, *chosen.woken}):
            rows.append((ns, p.name, chosen.reason(ns)))
    return _columns(rows) if len(rows) > 1 else ""


def calendar_words(chosen: PolicySelection) -> str:
    """A policy's exceptions seen before they happen: today's, the next one, and when the hold next changes."""
    parts = [f"today {chosen.exception.words()}"] if chosen.exception is not None else []
    if chosen.next_exception is not None:
        parts.append(f"next exception: {chosen.next_exception.words()}")
    change = chosen.next_change
    parts.append(f"hold changes next {change:%Y-%m-%dT%H:%MZ}" if change else "no hold change ahead")
    return "calendar: " + "; ".join(parts)


def plan_table(report: RunReport) -> str:
    """The dry-run view, kubectl-style: why each namespace is held or kept, then what would change and why."""
    rows: list[tuple[str, ...]] = [("NAMESPACE", "KIND", "NAME", "REPLICAS", "ACTION", "FREES", "POLICY", "WHY")]
    for r in sorted(report.results, key=lambda r: r.action.workload.key):
        w, handler = r.action.workload, r.action.workload.handling
        rows.append((w.namespace, w.kind.value, w.name, f"{handler.describe(w.size)} -> "
                     f"{handler.describe(r.action.after)}", r.action.verb.value, _frees_text(r), r.action.policy,
                     r.action.reason))
    namespaces = namespace_table(report)
    changes = _columns(rows) if len(rows) > 1 else "nothing to change\n"
    return f"{namespaces}\n{changes}" if namespaces else changes


def _frees(r: ActionResult) -> freed_api.Footprint | str | None:
    """What a freeze frees (before it happens, in a dry run): a footprint, "unknown", or None (not a freeze)."""
    if r.action.verb is not Verb.FREEZE:
        return None
    found = freed_api.frees(r.action.workload, freezing=True)
    return "unknown" if found is None else found


def _frees_text(r: ActionResult) -> str:
    found = _frees(r)
    if found is None or isinstance(found, str):
        return found or "-"
    return freed_api.summary(found)


def _frees_json(r: ActionResult) -> dict[str, Any] | str | None:
    found = _frees(r)
    if found is None or isinstance(found, str):
        return found
    return {"pods": found.pods, "podsWithoutRequests": found.unrequested,
            "requests": {k: format_quantity(v) for k, v in sorted(found.requests.items())},
            "limits": {k: format_quantity(v) for k, v in sorted(found.limits.items())}}


def _selection_json(outcome: PolicyOutcome) -> dict[str, Any]:
    chosen = outcome.selection
    if chosen is None:
        return {}
    return {
        "expired": chosen.expired,
        "nextChange": chosen.next_change.isoformat() if chosen.next_change else None,
        "recent": {ns: {"lastActivity": c.time.isoformat(), "by": c.by} for ns, c in sorted(chosen.recent.items())},
        "notHolding": chosen.not_holding or None,
        "exception": exception_entry(chosen.exception),
        "nextException": exception_entry(chosen.next_exception),
        "woken": woken_entries(sorted(chosen.woken.items())),
    }


def as_json(report: RunReport, *, with_actions: bool = True) -> dict[str, Any]:
    _, fields = summary(report)
    return {
        "summary": fields,
        "started": report.started.isoformat(),
        "finished": (report.finished or report.started).isoformat(),
        "policies": [{
            "name": p.name, "ok": p.ok, "done": p.done, "invalid": p.invalid, "suspended": p.suspended,
            "dryRun": p.dry_run, "held": p.held, "active": p.active, "keptRunning": p.kept_running_by,
            **figures.report_figures(p), "adopted": p.adopted, "failures": p.failures,
            "capExceeded": p.cap_message, "holding": p.holding,
            "remaining": remaining_entries(p.remaining),
            "reverted": reverted_entries(p.reverted),
            syncs.STATUS_KEY: syncs.entries(p.syncs_refused),
            "freed": freed_entry(p.freed, list_limit=MAX_TOP_NAMESPACES),
            "restoring": restoring_entries(p.restoring),
            "restoredLate": late_entries(p.late),
            "freezeIncomplete": incomplete_entries(p.incomplete),
            **_selection_json(p),
        } for p in report.policies],
        "actions": [_action_json(r) for r in report.results] if with_actions else [],
        "problems": report.problems,
    }


def _action_json(r: ActionResult) -> dict[str, Any]:
    return {"verb": r.action.verb.value, "outcome": r.outcome, "message": r.message, "policy": r.action.policy,
            "kind": r.action.workload.kind.value, "namespace": r.action.workload.namespace,
            "name": r.action.workload.name, "before": r.action.workload.size, "after": r.action.after,
            "reason": r.action.reason, **({"frees": frees} if (frees := _frees_json(r)) is not None else {})}


def write_json(report: RunReport, out: TextIO) -> None:
    """`as_json`, written out one action at a time: the report of a run that changed 40,000 workloads is
    never built whole in memory."""
    doc = as_json(report, with_actions=False)
    out.write("{")
    for i, (key, value) in enumerate(doc.items()):
        out.write(f'{"," if i else ""}\n  {json.dumps(key)}: ')
        if key != "actions":
            out.write(json.dumps(value, indent=2).replace("\n", "\n  "))
            continue
        out.write("[")
        for j, result in enumerate(report.results):
            out.write(f'{"," if j else ""}\n    {json.dumps(_action_json(result))}')
        out.write("\n  ]" if report.results else "]")
    out.write("\n}\n")
