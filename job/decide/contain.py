"""One policy's unexpected failure stays that policy's (pure).

Deciding is one pass over every policy at once (active wins across policies), so an error nobody expected in
one policy's part would stop the others. `quarantine` runs a pass; when it raises, it runs the pass for each
serving policy alone to find those that fail by themselves, turns them into invalid policies that say what
happened (their status, an Event, exit 1; what they froze stays frozen, as for any invalid policy), and runs the
pass again without them. A failure no single policy causes is raised: it is nobody's alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from job.errors import unexpected
from job.model.policy import InvalidPolicy, Policy

T = TypeVar("T")
Policies = Sequence[Policy | InvalidPolicy]


def quarantine(policies: Policies, attempt: Callable[[Policies], T]) -> tuple[tuple[Policy | InvalidPolicy, ...], T]:
    """`attempt(policies)`, or, when it raises, `attempt` of the policies with each one that fails alone made
    invalid; returns the policies it was run with and its result."""
    try:
        return tuple(policies), attempt(policies)
    except Exception:
        failing = failing_alone(policies, attempt)
        if not failing:
            raise
    kept = tuple(InvalidPolicy(p.name, p.generation, f"could not be served: {failing[p.name]}", p.uid, p.status,
                                p.life)
                 if p.name in failing else p for p in policies)
    return kept, attempt(kept)


def failing_alone(policies: Policies, attempt: Callable[[Policies], object]) -> dict[str, str]:
    """The serving policies for which `attempt` raises with no other serving policy beside them, and what each
    raised."""
    invalid = [p for p in policies if not isinstance(p, Policy)]
    failing = {}
    for policy in (p for p in policies if isinstance(p, Policy)):
        try:
            attempt([*invalid, policy])
        except Exception as exc:
            failing[policy.name] = unexpected(exc)
    return failing
