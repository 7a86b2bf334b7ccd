"""Data shipped with pddplan (installed as ``pddplan.data``): a sample request trace, so that
``pddplan workload fit`` and a scenario's ``workload.trace`` can be tried without one of
your own. ``README.md`` beside it says where it comes from, how it was cut and its licence.

May import: nothing."""

from __future__ import annotations

from pathlib import Path

SAMPLE_TRACE = "mooncake-conversation-240s.jsonl"
"""The sample's file name: the first 240 s (731 requests) of the Mooncake FAST'25
conversation trace."""


def sample_trace() -> Path:
    """The path of the sample trace installed with pddplan (Mooncake JSONL, 731 requests
    over 240 s), wherever the package is installed: ``pddplan workload fit
    "$(pddplan workload sample)"`` on the command line."""
    return Path(__file__).resolve().parent / SAMPLE_TRACE
