"""The unit tier's hypothesis profile, chosen by `HYPOTHESIS_PROFILE` (see tests/unit/examples.py).

Loaded here, before any test module is imported, so a property's `@settings(...)` inherits it."""

from __future__ import annotations

from hypothesis import settings

from tests.unit.examples import profile

settings.load_profile(profile())
