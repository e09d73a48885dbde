"""Fuzz the command line: every subcommand with good and bad flags, --out targets that hold the user's
files (nothing the user made may be deleted or changed), and markup in whatever kvsim echoes."""

from __future__ import annotations

from harness import check
from hypothesis import given
from profile_settings import fuzz_settings
from strategies.cli_args import cli_cases
from strategies.markup import markup_cases
from strategies.out_folders import out_cases


@fuzz_settings(120)
@given(cli_cases())
def test_command_lines(worker, case):
    check(case, worker)


@fuzz_settings(20)
@given(out_cases())
def test_output_folders(worker, case):
    check(case, worker)


@fuzz_settings(12)
@given(markup_cases())
def test_markup_printed_verbatim(worker, case):
    check(case, worker)
