"""How many examples a hypothesis property draws: its own count, or a few under `make mutation`.

A property's own `max_examples=` wins over any loaded profile, so each property asks `examples(n)` for its
count. Unset, `HYPOTHESIS_PROFILE` changes nothing: every property draws the count written beside it.
Set to `mutation` (as `make mutation` does), every property draws a few examples in a fixed order (derandomized,
no example database), so a mutant's tests run in seconds on two cores and give the same verdict twice.
tests/unit/conftest.py loads the profile.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"
MUTATION = "mutation"

settings.register_profile(MUTATION, max_examples=10, derandomize=True, database=None, deadline=None)


def profile() -> str:
    """The hypothesis profile the environment selects ("default" when none)."""
    return os.environ.get(PROFILE_VARIABLE) or "default"


def examples(count: int) -> int:
    """`count`, or the mutation profile's few when that profile is selected."""
    return settings.get_profile(MUTATION).max_examples if profile() == MUTATION else count
