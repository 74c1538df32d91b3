"""CEL rules across an object's fields that speak of which fields are there, read so that a generator can build
objects that keep them (`tests.schema_fuzz`): `has(self.a)`, `!`, `&&`, `||`, `==` and `!=` between such terms,
parentheses, `[has(self.a), has(self.b)].filter(x, x).size() <= n` (at most n of them), and an order between two
fields' values (`self.end >= self.date`). A rule with anything else (a call, a literal, `oldSelf`) is not read:
`rule` returns None and the generator leaves it to the API server.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_PIECE = re.compile(r"\s*(has\(self\.\w+\)|self\.\w+|\.filter\(x,\s*x\)\.size\(\)|&&|\|\||==|!=|>=|<=|[<>!()\[\],]|"
                    r"[0-9]+)")
_ORDER = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_EQUAL = {"==": operator.eq, "!=": operator.ne}
#: the most fields a set of rules may name: every combination of them is tried once per schema
MOST_FIELDS = 12

#: a rule read: given an object and whether orders between values count, whether the object keeps it
Check = Callable[[Mapping[str, Any], bool], bool]


@dataclass(frozen=True)
class Order:
    """`self.<left> <op> self.<right>`: both fields' values, when both are there, must be in this order."""

    left: str
    op: str
    right: str

    def holds(self, obj: Mapping[str, Any]) -> bool:
        return _ORDER[self.op](obj[self.left], obj[self.right])


@dataclass(frozen=True)
class Rule:
    """A rule read: the check, the fields whose presence it speaks of, and the orders between values it states."""

    check: Check
    fields: frozenset[str]
    orders: tuple[Order, ...]

    def kept_by(self, obj: Mapping[str, Any], *, orders: bool = True) -> bool:
        """Whether `obj` keeps the rule; without `orders`, as if every order between values held."""
        try:
            return self.check(obj, orders)
        except (KeyError, TypeError):  # an order between fields one of which is absent, or not comparable
            return False


class _Unread(Exception):
    """The rule says more than which fields are there."""


def _pieces(text: str) -> list[str]:
    out, at = [], 0
    while at < len(text.rstrip()):
        found = _PIECE.match(text, at)
        if not found:
            raise _Unread(text[at:])
        out.append(found.group(1))
        at = found.end()
    return out


class _Reader:
    """A descent over the pieces: `either := both ('||' both)*`, `both := same ('&&' same)*`,
    `same := one (('=='|'!=') one)?`, `one := '!' one | '(' either ')' | has | list filter op n | field op field`."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces, self.at = pieces, 0
        self.fields: set[str] = set()
        self.orders: list[Order] = []

    def peek(self) -> str | None:
        return self.pieces[self.at] if self.at < len(self.pieces) else None

    def take(self, *expected: str) -> str:
        piece = self.peek()
        if piece is None or (expected and piece not in expected):
            raise _Unread(f"expected {expected or 'more'} at {piece!r}")
        self.at += 1
        return piece

    def either(self) -> Check:
        parts = [self.both()]
        while self.peek() == "||":
            self.take()
            parts.append(self.both())
        return parts[0] if len(parts) == 1 else lambda obj, orders: any(p(obj, orders) for p in parts)

    def both(self) -> Check:
        parts = [self.same()]
        while self.peek() == "&&":
            self.take()
            parts.append(self.same())
        return parts[0] if len(parts) == 1 else lambda obj, orders: all(p(obj, orders) for p in parts)

    def same(self) -> Check:
        left = self.one()
        if self.peek() not in _EQUAL:
            return left
        compare, right = _EQUAL[self.take()], self.one()
        return lambda obj, orders: compare(left(obj, orders), right(obj, orders))

    def one(self) -> Check:
        piece = self.take()
        if piece == "!":
            inner = self.one()
            return lambda obj, orders: not inner(obj, orders)
        if piece == "(":
            inner = self.either()
            self.take(")")
            return inner
        if piece.startswith("has("):
            return self.present(piece[len("has(self."):-1])
        if piece == "[":
            return self.at_most()
        if piece.startswith("self."):
            return self.order(piece[len("self."):])
        raise _Unread(piece)

    def present(self, field: str) -> Check:
        self.fields.add(field)
        return lambda obj, _orders: field in obj

    def at_most(self) -> Check:
        terms = [self.one()]
        while self.take(",", "]") == ",":
            terms.append(self.one())
        if not self.take().startswith(".filter("):
            raise _Unread("a list of terms that is not counted")
        compare, bound = _ORDER[self.take(*_ORDER)], self.take()
        if not bound.isdigit():
            raise _Unread(bound)
        return lambda obj, orders: compare(sum(bool(t(obj, orders)) for t in terms), int(bound))

    def order(self, left: str) -> Check:
        op = self.take(*_ORDER)
        right = self.take()
        if not right.startswith("self."):
            raise _Unread(right)
        known = Order(left, op, right[len("self."):])
        self.orders.append(known)
        return lambda obj, orders: known.holds(obj) if orders else True


def rule(text: str) -> Rule | None:
    """The rule, read; None when it says more than which fields are there and how two values are ordered."""
    try:
        reader = _Reader(_pieces(text))
        check = reader.either()
        if reader.peek() is not None:
            raise _Unread(str(reader.peek()))
    except _Unread:
        return None
    return Rule(check, frozenset(reader.fields), tuple(reader.orders))


def allowed_presences(rules: Iterable[Rule]) -> list[frozenset[str]]:
    """Every set of the rules' fields that keeps them all (orders between values aside), fewest fields first;
    empty when they name too many fields to try every set (`MOST_FIELDS`)."""
    rules = list(rules)
    names = sorted(set().union(*(r.fields for r in rules)))
    if len(names) > MOST_FIELDS:
        return []
    sets = (frozenset(c) for size in range(len(names) + 1) for c in itertools.combinations(names, size))
    return [s for s in sets if all(r.kept_by(dict.fromkeys(s), orders=False) for r in rules)]


def put_in_order(obj: dict[str, Any], rules: Iterable[Rule]) -> dict[str, Any]:
    """`obj` with the two values of each order the rules state swapped when they are the wrong way round."""
    kept = dict(obj)
    for known in (o for r in rules for o in r.orders):
        if known.left in kept and known.right in kept:
            try:
                if not known.holds(kept):
                    kept[known.left], kept[known.right] = kept[known.right], kept[known.left]
            except TypeError:  # values that do not compare: the API server says so
                continue
    return kept
