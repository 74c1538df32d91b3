"""Hypothesis strategies derived from a CRD's own `openAPIV3Schema`, biased to the edges a hostile or careless
writer reaches: the limits the schema states and one past them, huge and negative numbers, dates at both ends of
the calendar and odd offsets, durations with many digits, empty, very long and non-ASCII strings, duplicates.

Everything is read from the schema (type, enum, format, pattern, the regex of a CEL `self.matches(...)` rule,
minLength/maxLength, minItems/maxItems, minimum/maximum), so a field added to a CRD is fuzzed without an edit here.
Half of the values keep to what the schema says (the API server admits them and nsscaler must serve or report
them); the other half go past it (the API server must refuse them, with a message).
"""

from __future__ import annotations

import os
import random
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

#: the seed of this session's examples: `FUZZ_SEED` replays a session, else a new one each time
SEED = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(2**32))
#: examples per fuzzing test: a fixed number, so a CI run costs the same every time
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 30)
#: what the API server did with each kind of generated object: (kind, "admitted" | "refused") -> count
TALLIES: Counter[tuple[str, str]] = Counter()


def tally(what: str, *, admitted: bool) -> None:
    TALLIES[what, "admitted" if admitted else "refused"] += 1


def summary() -> str:
    """One line for the end of the session: the seed to replay, and what was tried."""
    kinds = sorted({what for what, _ in TALLIES})
    parts = [f"{what}: {TALLIES[what, 'admitted'] + TALLIES[what, 'refused']} tried, {TALLIES[what, 'admitted']} "
             f"admitted, {TALLIES[what, 'refused']} refused" for what in kinds]
    return f"schema fuzzing (replay with FUZZ_SEED={SEED}): " + "; ".join(parts)

#: a CEL rule that says a string must match a regex
_MATCHES = re.compile(r"self\.matches\('((?:[^'\\]|\\.)*)'\)")
#: longer than any limit nsscaler or the CRDs state, short enough to send many
LONG = 3000

_NON_ASCII = st.sampled_from(["ß", "é", "日本", "🙂", "\u200b", "\u0000", "ǅ", "Ⅻ", "²", "٣", "\ufeff"])
_EDGE_INTS = st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63)])
_EDGE_DATES = st.sampled_from([
    "9999-12-31T23:59:59-01:00", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z", "8999-12-31T00:00:00+14:00", "2026-02-29T00:00:00Z",
    "2026-12-04T18:00:00.123456789Z", "2026-12-04T18:00:00+23:59", "2026-12-04T18:00:00-23:59",
    "2026-12-04 18:00:00Z", "2026-12-04T18:00:00", "2026-13-01T00:00:00Z", "not-a-date", ""])


def _dates() -> st.SearchStrategy[str]:
    """RFC 3339 date-times anywhere in the calendar, with any offset a writer could type."""
    offsets = st.one_of(st.just("Z"), st.builds(lambda sign, h, m: f"{sign}{h:02}:{m:02}",
                                                st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59)))
    instants = st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S"))
    return st.one_of(_EDGE_DATES, st.builds(lambda when, off: when + off, instants, offsets))


def _durations() -> st.SearchStrategy[str]:
    """Durations of the `3h`/`1h30m` shape with few and very many digits, and near-misses."""
    part = st.builds(lambda digits, unit: digits + unit, st.from_regex(r"[0-9]{1,40}", fullmatch=True),
                     st.sampled_from("dhms"))
    return st.one_of(st.lists(part, min_size=1, max_size=6).map("".join),
                     st.sampled_from(["0s", "3000000d", "99999999999999999999d", "-3h", "3H", "1.5h", "3", "h",
                                      "9" * 4400 + "s", "1h 30m", "P1D"]))


def _strings(schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    regexes = [schema["pattern"]] if "pattern" in schema else []
    regexes += [m.group(1).replace("\\\\", "\\") for rule in schema.get("x-kubernetes-validations") or ()
                for m in [_MATCHES.search(str(rule.get("rule", "")))] if m]
    kept = []
    if schema.get("format") == "date-time":
        kept.append(_dates())
    for regex in regexes:
        kept.append(st.from_regex(regex, fullmatch=True).filter(lambda s: high is None or len(s) <= high))
        if "[dhms]" in regex:
            kept.append(_durations())
    if "enum" in schema:
        kept.append(st.sampled_from(schema["enum"]))
    kept.append(st.text(min_size=low, max_size=min(high or 64, 64)))
    edges = [st.just(""), st.text(_NON_ASCII, min_size=1, max_size=8), st.just("x" * LONG),
             st.from_regex(r"[0-9]{1,60}", fullmatch=True), st.from_regex(r"-[0-9]{1,30}", fullmatch=True)]
    if high is not None:
        edges += [st.just("a" * int(high)), st.just("a" * (int(high) + 1))]
    return st.one_of(st.one_of(*kept), st.one_of(*edges))


def _integers(schema: Mapping[str, Any]) -> st.SearchStrategy[int]:
    low, high = schema.get("minimum"), schema.get("maximum")
    edges = [_EDGE_INTS] + [st.just(v) for bound in (low, high) if bound is not None for v in (bound - 1, bound,
                                                                                            bound + 1)]
    inside = st.integers(min_value=low, max_value=high)
    return st.one_of(inside, *edges)


def _arrays(schema: Mapping[str, Any], *, depth: int) -> st.SearchStrategy[list[Any]]:
    items = strategy(schema.get("items") or {}, depth=depth + 1)
    low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
    sizes = [st.lists(items, min_size=low, max_size=min(int(high or 5), 5))]
    if low:
        sizes.append(st.just([]))
    if high is not None:  # at the limit and one past it: one value repeated keeps the list cheap to build
        sizes.append(items.flatmap(lambda one: st.sampled_from([[one] * int(high), [one] * (int(high) + 1)])))
    sizes.append(items.map(lambda one: [one, one]))  # a duplicate, in a list that may be a set
    return st.one_of(*sizes)


def _objects(schema: Mapping[str, Any], *, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    fields = {name: strategy(sub, depth=depth + 1) for name, sub in properties.items()}
    whole = st.fixed_dictionaries({k: v for k, v in fields.items() if k in required},
                                  optional={k: v for k, v in fields.items() if k not in required})
    unknown = whole.flatmap(lambda obj: st.just({**obj, "unknown_field": "x"}))  # pruned or refused: never read
    return st.one_of(whole, whole, whole, unknown)


def strategy(schema: Mapping[str, Any], *, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for one schema node: mostly of its type, now and then of another (the API server refuses them)."""
    kind = schema.get("type")
    if kind == "object" and depth < 6:
        typed: st.SearchStrategy[Any] = _objects(schema, depth=depth)
    elif kind == "array" and depth < 6:
        typed = _arrays(schema, depth=depth)
    elif kind == "string":
        typed = _strings(schema)
    elif kind == "integer":
        typed = _integers(schema)
    elif kind == "boolean":
        typed = st.booleans()
    else:
        typed = st.none()
    wrong = st.sampled_from([None, "true", 1, [], {}, 1.5])
    return st.one_of(typed, typed, typed, typed, typed, typed, typed, typed, typed, wrong)


def spec_schema(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The `spec` schema of a CRD's storage version."""
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def without_bounds(crd: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a CRD whose `spec` accepts anything: the run's own checks, the second line, are then all there is."""
    copy: dict[str, Any] = {**crd, "metadata": {"name": crd["metadata"]["name"]}}
    versions = []
    for version in crd["spec"]["versions"]:
        schema = dict(version["schema"]["openAPIV3Schema"])
        schema["properties"] = {**schema["properties"], "spec": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}
        versions.append({**version, "schema": {"openAPIV3Schema": schema}})
    copy["spec"] = {**crd["spec"], "versions": versions}
    return copy
