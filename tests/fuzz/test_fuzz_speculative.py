"""Fuzz the `speculative` section (issue 26): valid sections must run, bad keys and combinations not
modelled must end in one `error:` line (exit 2)."""

from __future__ import annotations

from harness import check
from hypothesis import given
from profile_settings import fuzz_settings
from strategies.speculative import speculative_cases


@fuzz_settings(40)
@given(speculative_cases())
def test_speculative_sections(worker, case):
    check(case, worker)
