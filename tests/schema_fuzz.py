"""Hypothesis strategies derived from a CRD's own `openAPIV3Schema`, biased to the edges a hostile or careless
writer reaches: the limits the schema states and one past them, huge and negative numbers, dates at both ends of
the calendar and odd offsets, durations with many digits, empty, very long and non-ASCII strings, duplicates.

Everything is read from the schema (type, enum, format, pattern, the regex of a CEL `self.matches(...)` rule and
of a `!self.matches(...)` one, the bound of a CEL rule that sums a duration's parts, CEL rules across fields that
say which fields go together (read by `tests.cel_presence`: "exactly one of", "at most one of", "a needs b", "a
not with b", an order between two fields' values), a CEL rule that bounds the days between two dates,
minLength/maxLength, minItems/maxItems, minimum/maximum, and the examples a field's description gives after
"e.g."), so a field added to a CRD is fuzzed without an edit here. Three values in four keep to what the schema
and its CEL rules say (the API server admits them and nsscaler must serve or report them: the tests assert a
floor of admitted examples); the others go past it (the API server must refuse them, with a message).

The seed is fixed (`DEFAULT_SEED`), so a CI run tries the same examples every time; `FUZZ_SEED` replays another
one, and `make fuzz-random` draws a new seed and prints it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from tests import cel_presence

#: the seed of every run that does not name one: the gate is the same examples each time
DEFAULT_SEED = 3
#: the seed of this session's examples: `FUZZ_SEED` replays a session (`make fuzz-random` draws one)
SEED = int(os.environ.get("FUZZ_SEED") or DEFAULT_SEED)
#: examples per fuzzing test: a fixed number, so a CI run costs the same every time
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 30)
#: what the API server did with each kind of generated object: (kind, "admitted" | "refused") -> count
TALLIES: Counter[tuple[str, str]] = Counter()


#: what the run made of admitted objects worth following: (what, "served" | "reported") -> count
OUTCOMES: Counter[tuple[str, str]] = Counter()


#: the fewest lawful draws a fuzzing test must try (`assert_floor`)
LAWFUL_AT_LEAST = 3
#: the same for the lawful draws alone (`tagged_specs`): what the floors are about
LAWFUL: Counter[tuple[str, str]] = Counter()


def tally(what: str, *, admitted: bool, lawful: bool | None = None) -> None:
    """Count one object the API server admitted or refused; `lawful`: whether it was drawn within the schema (None:
    not known, as for workloads' marks)."""
    TALLIES[what, "admitted" if admitted else "refused"] += 1
    if lawful:
        LAWFUL[what, "admitted" if admitted else "refused"] += 1


def outcome(what: str, *, served: bool) -> None:
    """An admitted object the run served (`served`) or reported invalid: a seed whose admitted exceptions are all
    reported invalid tries the exceptions' days never, and the session's line says so."""
    OUTCOMES[what, "served" if served else "reported"] += 1


def counted(what: str) -> tuple[int, int, int, int]:
    """(tried, admitted, lawful tried, lawful admitted) so far for one kind of generated object."""
    return (TALLIES[what, "admitted"] + TALLIES[what, "refused"], TALLIES[what, "admitted"],
            LAWFUL[what, "admitted"] + LAWFUL[what, "refused"], LAWFUL[what, "admitted"])


def assert_floor(what: str, *, before: tuple[int, int, int, int], share: float, tagged: bool = False) -> str:
    """Since `before` (a `counted`), at least `share` of the lawful examples of `what` were admitted (`tagged`: drawn
    by `tagged_specs`; else of all tried), and at least half of `EXAMPLES` were tried: a generator whose lawful examples
    the API server refuses fails here, not silently. How many hostile ones a seed draws varies (Hypothesis drew
    other examples for one seed in a full session than alone), so they are not in the floor. Returns the line."""
    tried, admitted, lawful_tried, lawful_admitted = (now - then for now, then in zip(counted(what), before,
                                                                                     strict=True))
    line = f"{what}: {tried} tried, {admitted} admitted, {tried - admitted} refused"
    assert tried >= EXAMPLES // 2, f"too few examples reached the API server: {line}"
    if tagged:
        # Hypothesis also draws constants of the code it has loaded, so a full session tries other, and fewer
        # lawful, examples than a test run alone (6 of 30 against 28 for the NSScalers at seed 3; likely the
        # lawful draws' filters refuse more of them): a few must still be tried.
        line += f"; lawful {lawful_tried} tried, {lawful_admitted} admitted (floor: {share:.0%} admitted)"
        assert lawful_tried >= LAWFUL_AT_LEAST, f"too few lawful examples tried: {line} (FUZZ_SEED={SEED})"
        assert lawful_admitted >= share * lawful_tried, f"too few lawful examples admitted: {line} (FUZZ_SEED={SEED})"
    else:
        line += f" (floor: {share:.0%} admitted)"
        assert admitted >= share * tried, f"too few examples admitted: {line} (FUZZ_SEED={SEED})"
    return line


def summary() -> str:
    """One line for the end of the session: the seed to replay, and what was tried."""
    kinds = sorted({what for what, _ in TALLIES})
    parts = [f"{what}: {TALLIES[what, 'admitted'] + TALLIES[what, 'refused']} tried, {TALLIES[what, 'admitted']} "
             f"admitted, {TALLIES[what, 'refused']} refused" for what in kinds]
    parts += [f"{what}: {OUTCOMES[what, 'served']} served, {OUTCOMES[what, 'reported']} reported InvalidSpec"
              for what in sorted({what for what, _ in OUTCOMES})]
    return f"schema fuzzing (replay with FUZZ_SEED={SEED}): " + "; ".join(parts)

#: a CEL rule that says a string must match a regex, and one that says it must not (a search, as CEL's `matches`)
_MATCHES = re.compile(r"(?<!!)self\.matches\('((?:[^'\\]|\\.)*)'\)")
_MATCHES_NOT = re.compile(r"!self\.matches\('((?:[^'\\]|\\.)*)'\)")
#: a CEL rule that bounds the seconds of a duration's parts, summed: `....sum() <= 604800`
_SUM_BOUND = re.compile(r"\.sum\(\)\s*<=\s*([0-9]+)")
#: seconds per unit of a duration's part
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
#: a CEL rule that bounds an integer by another field: `self.a < (has(self.b) && self.b == 'v' ? 168 : 24)`
_BELOW_BY = re.compile(r"self\.(\w+)\s*<\s*\(has\(self\.(\w+)\)\s*&&\s*self\.\2\s*==\s*'(\w+)'\s*\?\s*([0-9]+)\s*:\s*"
                       r"([0-9]+)\)")
#: a CEL rule that bounds the days between two dates: `timestamp(self.end + ...) - timestamp(self.date + ...) <=
#: duration('8760h')`
_SPAN = re.compile(r"timestamp\(self\.(\w+) \+ '[^']*'\) - timestamp\(self\.(\w+) \+ '[^']*'\) "
                   r"<= duration\('([0-9]+)h'\)")
#: a CEL rule that wants a `YYYY-MM-DD` day that exists (it reads the day of the month against the month's length)
_DAY_EXISTS = re.compile(r"int\(self\.substring\(8, 10\)\)\s*<=")
#: the examples a field's description gives: `e.g. "Mon-Fri 19:00-07:00", "Sat,Sun 00:00-24:00" or "22:00-06:00"`
_EXAMPLES = re.compile(r'e\.g\.((?:\s*(?:,|or)?\s*"[^"]+")+)')
_QUOTED = re.compile(r'"([^"]+)"')
#: longer than any limit nsscaler or the CRDs state, short enough to send many
LONG = 3000

_NON_ASCII = st.lists(st.sampled_from(["ß", "é", "日本", "🙂", "\u200b", "\u0000", "ǅ", "Ⅻ", "²", "٣", "\ufeff"]),
                      min_size=1, max_size=8).map("".join)
_EDGE_INTS = st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63)])
_EDGE_DATES = st.sampled_from([
    "9999-12-31T23:59:59-01:00", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z", "8999-12-31T00:00:00+14:00", "2026-02-29T00:00:00Z",
    "2026-12-04T18:00:00.123456789Z", "2026-12-04T18:00:00+23:59", "2026-12-04T18:00:00-23:59",
    "2026-12-04 18:00:00Z", "2026-12-04T18:00:00", "2026-13-01T00:00:00Z", "not-a-date", ""])


def _dates(*, lawful: bool) -> st.SearchStrategy[str]:
    """RFC 3339 date-times with any offset a writer could type: from 1970 to 8999 when `lawful` (the range the
    CRDs admit, its ends included), else anywhere in the calendar and not always RFC 3339."""
    offsets = st.one_of(st.just("Z"), st.builds(lambda sign, h, m: f"{sign}{h:02}:{m:02}",
                                                st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59)))
    low, high = (dt.datetime(1971, 1, 1), dt.datetime(8998, 12, 31)) if lawful else (dt.datetime.min, dt.datetime.max)
    instants = st.datetimes(min_value=low, max_value=high).map(lambda d: f"{d.year:04}-{d:%m-%dT%H:%M:%S}")
    written = st.builds(lambda when, off: when + off, instants, offsets)
    if lawful:
        return st.one_of(written, st.sampled_from(["1970-01-01T00:00:00Z", "8999-12-31T23:59:59Z",
                                                   "2026-12-04T18:00:00.123456789Z", "2026-12-04T18:00:00+23:59"]))
    return st.one_of(_EDGE_DATES, written)


def _durations() -> st.SearchStrategy[str]:
    """Durations of the `3h`/`1h30m` shape with few and very many digits, and near-misses."""
    part = st.builds(lambda digits, unit: digits + unit, st.from_regex(r"[0-9]{1,40}", fullmatch=True),
                     st.sampled_from("dhms"))
    return st.one_of(st.lists(part, min_size=1, max_size=6).map("".join),
                     st.sampled_from(["0s", "3000000d", "99999999999999999999d", "-3h", "3H", "1.5h", "3", "h",
                                      "1h 30m", "P1D"]),
                     st.just(4400).map(lambda n: "9" * n + "s"))


def _bounded_durations(limit: int) -> st.SearchStrategy[str]:
    """Durations of one to four parts (`1h30m`) whose seconds sum to at most `limit`, as a CEL rule requires; each
    part of at most 7 digits, now and then with leading zeros, and the limit itself reached too."""
    def part(budget: int) -> st.SearchStrategy[tuple[str, int]]:
        units = [u for u, secs in _UNIT_SECONDS.items() if secs <= budget] or ["s"]
        return st.sampled_from(units).flatmap(lambda u: st.builds(
            lambda n, zeros: ("0" * zeros + str(n))[-7:] + u,
            st.integers(0, min(9_999_999, budget // _UNIT_SECONDS[u])), st.integers(0, 2)).map(
                lambda text, u=u: (text, int(text[:-1]) * _UNIT_SECONDS[u])))

    def parts(count: int) -> st.SearchStrategy[str]:
        share = limit // count  # each part within its share: the sum is within the limit
        return st.lists(part(share), min_size=count, max_size=count).map(lambda ps: "".join(t for t, _ in ps))
    at_limit = [f"{limit // secs}{unit}" for unit, secs in _UNIT_SECONDS.items() if limit % secs == 0
                and len(str(limit // secs)) <= 7]
    return st.one_of(st.integers(1, 4).flatmap(parts), st.sampled_from(at_limit))


def described_examples(schema: Mapping[str, Any]) -> list[str]:
    """The values a field's description gives as examples (`e.g. "Europe/Berlin"`), in its words' order."""
    found = _EXAMPLES.search(" ".join(str(schema.get("description", "")).split()))
    return _QUOTED.findall(found.group(1)) if found else []


def _strings(schema: Mapping[str, Any], *, lawful: bool) -> st.SearchStrategy[str]:
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    rules = [str(rule.get("rule", "")) for rule in schema.get("x-kubernetes-validations") or ()]
    regexes = [schema["pattern"]] if "pattern" in schema else []
    regexes += [m.group(1).replace("\\\\", "\\") for rule in rules for m in [_MATCHES.search(rule)] if m]
    unwanted = [m.group(1).replace("\\\\", "\\") for rule in rules for m in [_MATCHES_NOT.search(rule)] if m]
    bounds = [int(m.group(1)) for rule in rules for m in [_SUM_BOUND.search(rule)] if m]
    if lawful and bounds:  # a duration whose parts' sum a CEL rule bounds: built within the bound
        return _bounded_durations(min(bounds))
    shaped = [st.from_regex(regex, fullmatch=True).filter(lambda s: high is None or low <= len(s) <= high)
              for regex in regexes]
    if schema.get("format") == "date-time":
        shaped.append(_dates(lawful=lawful))
    if "enum" in schema:
        shaped.append(st.sampled_from(schema["enum"]))
    if any("[dhms]" in regex for regex in regexes) and not lawful:
        shaped.append(_durations())
    if not shaped:  # free text: within its limits, at them, and not ASCII
        limit = min(int(high), LONG) if high is not None else 64
        shaped += [st.text(min_size=low, max_size=min(limit, 64)), _NON_ASCII.filter(lambda s: low <= len(s) <= limit),
                   st.just(limit).map(lambda n: "a" * n)]
        examples = described_examples(schema)
        if lawful and examples:
            # Free text with a grammar only its description states (a zone, a window): its examples fifteen
            # times in sixteen, so that a lawful policy, which has several such fields, is often served rather
            # than reported for one of them. The other draws still try the text nsscaler must report.
            anything = st.one_of(*shaped)
            return st.integers(0, 15).flatmap(lambda i: anything if i == 15 else st.sampled_from(examples))
    if lawful:
        wants_a_day = any(_DAY_EXISTS.search(rule) for rule in rules)
        drawn = st.one_of(*shaped).filter(lambda s: not any(re.search(regex, s) for regex in unwanted)
                                          and (not wants_a_day or _a_day(s)))
        # A shape admits much a run must still report (a rule part with a value of the wrong kind, a country
        # code no country has): the examples its description gives, three times in four, let the lawful draws
        # be served too.
        examples = described_examples(schema)
        return st.integers(0, 3).flatmap(lambda i: drawn if i == 3 else st.sampled_from(examples)) if examples \
            else drawn
    # long values are built when drawn (`map`), so that the strategy's own description stays short
    edges = [st.just(""), _NON_ASCII, st.just(LONG).map(lambda n: "x" * n),
             st.from_regex(r"[0-9]{1,60}", fullmatch=True), st.from_regex(r"-[0-9]{1,30}", fullmatch=True)]
    if high is not None:
        edges.append(st.sampled_from([int(high), int(high) + 1]).map(lambda n: "a" * n))
    edges += [st.from_regex(regex).filter(lambda s: high is None or len(s) <= high) for regex in unwanted]
    return st.one_of(st.one_of(*shaped), st.one_of(*edges))


def _a_day(text: str) -> bool:
    """Whether `text` (already of the `YYYY-MM-DD` shape) names a day that exists, as the CEL rule wants."""
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _integers(schema: Mapping[str, Any], *, lawful: bool) -> st.SearchStrategy[int]:
    low, high = schema.get("minimum"), schema.get("maximum")
    bounds = [b for b in (low, high) if b is not None]
    inside = st.one_of(st.integers(min_value=low, max_value=high), *(st.just(b) for b in bounds))
    if lawful:
        return inside
    return st.one_of(inside, _EDGE_INTS, *(st.just(b + step) for b in bounds for step in (-1, 1)))


def _arrays(schema: Mapping[str, Any], *, depth: int, lawful: bool) -> st.SearchStrategy[list[Any]]:
    item_schema = dict(schema.get("items") or {})
    if "description" not in item_schema and described_examples(schema):  # a list's examples are of its items
        item_schema["description"] = schema["description"]
    items = strategy(item_schema, depth=depth + 1, lawful=lawful)
    low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
    unique = lawful and schema.get("x-kubernetes-list-type") == "set"
    top = min(int(high), 5) if high is not None else 5
    sizes = [st.lists(items, min_size=low, max_size=max(low, top), unique_by=repr if unique else None)]
    if lawful:
        return st.one_of(*sizes)
    if low:
        sizes.append(st.just([]))
    if high is not None:  # at the limit and one past it: one value repeated keeps the list cheap to build
        at_limit = st.tuples(items, st.sampled_from([int(high), int(high) + 1]))
        sizes.append(at_limit.map(lambda pair: [pair[0]] * pair[1]))
    sizes.append(items.map(lambda one: [one, one]))  # a duplicate, in a list that may be a set
    return st.one_of(*sizes)


def _objects(schema: Mapping[str, Any], *, depth: int, lawful: bool) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    fields = {name: strategy(sub, depth=depth + 1, lawful=lawful) for name, sub in properties.items()}
    whole = st.fixed_dictionaries({k: v for k, v in fields.items() if k in required},
                                  optional={k: v for k, v in fields.items() if k not in required})
    if lawful:  # what the rules across fields allow too: the fields they want together; a bound set by another field
        rules = [str(rule.get("rule", "")) for rule in schema.get("x-kubernetes-validations") or ()]
        below = [m.groups() for rule in rules for m in [_BELOW_BY.search(rule)] if m]
        whole = whole.map(lambda obj: _within_bounds_by(obj, below)) if below else whole
        spans = spans_of(schema)
        together = [read for read in map(cel_presence.rule, rules) if read is not None]
        allowed = [chosen for chosen in cel_presence.allowed_presences(together)
                   if chosen <= properties.keys() and required & _named(together) <= chosen]
        ordered = whole.flatmap(lambda obj: _present_as_allowed(obj, allowed, together, fields)) if allowed else whole
        return ordered.map(lambda obj: _within_spans(obj, spans)) if spans else ordered
    # now and then a field the schema does not know: pruned or refused, never read
    return st.tuples(whole, st.integers(0, 3)).map(lambda pair: {**pair[0], "unknown_field": "x"} if pair[1] == 0
                                                   else pair[0])


def _within_bounds_by(obj: dict[str, Any], rules: list[tuple[str, ...]]) -> dict[str, Any]:
    """`obj` with each integer a `_BELOW_BY` rule bounds brought under its bound (the one the other field picks)."""
    kept = dict(obj)
    for field, other, value, when, otherwise in rules:
        limit = int(when) if kept.get(other) == value else int(otherwise)
        if isinstance(kept.get(field), int) and kept[field] >= limit:
            kept[field] = limit - 1
    return kept


def spans_of(schema: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The `_SPAN` rules of an object's schema: (later field, earlier field, hours)."""
    rules = [" ".join(str(rule.get("rule", "")).split()) for rule in schema.get("x-kubernetes-validations") or ()]
    return [m.groups() for rule in rules for m in [_SPAN.search(rule)] if m]


def _within_spans(obj: dict[str, Any], spans: list[tuple[str, ...]]) -> dict[str, Any]:
    """`obj` with each later day a `_SPAN` rule bounds brought within its bound of the earlier one."""
    kept = dict(obj)
    for later, earlier, hours in spans:
        try:
            first, last = dt.date.fromisoformat(kept[earlier]), dt.date.fromisoformat(kept[later])
        except (KeyError, TypeError, ValueError):
            continue
        longest = dt.timedelta(hours=int(hours))
        if last - first > longest:
            kept[later] = (first + longest).isoformat()
    return kept


def _named(rules: list[cel_presence.Rule]) -> set[str]:
    return set().union(*(read.fields for read in rules))


def _present_as_allowed(obj: dict[str, Any], allowed: list[frozenset[str]], rules: list[cel_presence.Rule],
                        fields: Mapping[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """`obj` with, of the fields the rules name, one set they allow (those it lacks drawn anew), and the values of
    each order they state the right way round."""
    named = _named(rules)

    def having(chosen: frozenset[str]) -> st.SearchStrategy[dict[str, Any]]:
        kept = {k: v for k, v in obj.items() if k not in named or k in chosen}
        drawn = st.fixed_dictionaries({k: fields[k] for k in sorted(chosen - kept.keys())})
        return drawn.map(lambda more: cel_presence.put_in_order({**kept, **more}, rules))
    return st.sampled_from(allowed).flatmap(having)


def strategy(schema: Mapping[str, Any], *, depth: int = 0, lawful: bool = False) -> st.SearchStrategy[Any]:
    """Values for one schema node. `lawful`: only what its schema states (types, limits, shapes; at the limits
    too), which the API server admits unless a rule across fields says otherwise; else also past every limit,
    now and then of another type."""
    kind = schema.get("type")
    if kind == "object" and depth < 6:
        typed: st.SearchStrategy[Any] = _objects(schema, depth=depth, lawful=lawful)
    elif kind == "array" and depth < 6:
        typed = _arrays(schema, depth=depth, lawful=lawful)
    elif kind == "string":
        typed = _strings(schema, lawful=lawful)
    elif kind == "integer":
        typed = _integers(schema, lawful=lawful)
    elif kind == "boolean":
        typed = st.booleans()
    else:
        typed = st.none()
    if lawful:
        return typed
    wrong = st.sampled_from([None, "true", 1, [], {}, 1.5])
    # one value in ten of another type; each strategy named once, or its description grows with every level
    return st.integers(0, 9).flatmap(lambda i: wrong if i == 0 else typed)


def tagged_specs(schema: Mapping[str, Any]) -> st.SearchStrategy[tuple[bool, Any]]:
    """(lawful, value): three in four lawful (mostly admitted: nsscaler must serve or report them), the others
    hostile (mostly refused, with a message). Hypothesis starts from the smallest draw (0): that one is lawful."""
    lawful, hostile = strategy(schema, lawful=True), strategy(schema)
    return st.integers(0, 3).flatmap(lambda i: hostile.map(lambda v: (False, v)) if i == 3
                                     else lawful.map(lambda v: (True, v)))


def specs(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """The values of `tagged_specs`."""
    return tagged_specs(schema).map(lambda drawn: drawn[1])


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
