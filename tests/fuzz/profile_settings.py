"""How many examples each fuzz test draws: the CI profile (default) keeps the whole suite near a minute
on a 2-core machine; KVSIM_FUZZ=long multiplies every count by LONG_FACTOR. Examples are derandomized
(the same cases every run, so CI is reproducible) and not shrunk unless KVSIM_FUZZ_SHRINK=1 (shrinking
a hang costs a time limit per step; the strategies build small cases to begin with)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("KVSIM_FUZZ", "ci").strip().lower() or "ci"
LONG_FACTOR = 25
SHRINK = os.environ.get("KVSIM_FUZZ_SHRINK", "") not in ("", "0")

if PROFILE not in ("ci", "long"):
    raise ValueError(f"KVSIM_FUZZ must be 'ci' or 'long', got {PROFILE!r}")


def examples(ci: int) -> int:
    """The example count for a test whose CI count is `ci`."""
    return ci * LONG_FACTOR if PROFILE == "long" else ci


def fuzz_settings(ci: int) -> settings:
    """Hypothesis settings for a fuzz test with `ci` examples in the CI profile."""
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if SHRINK else [])
    return settings(max_examples=examples(ci), deadline=None, derandomize=True, database=None,
                    phases=phases, suppress_health_check=list(HealthCheck), print_blob=False)
