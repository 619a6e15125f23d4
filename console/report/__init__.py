"""Validation reports for a pull request: what each attempt ran, how far it got, why it failed,
and the points, as GitHub Markdown or JSON.

- :mod:`gather`: the facts, read from the store, the result files and the logs;
- :mod:`words`: the furthest stage reached, durations and times, in words;
- :mod:`markdown`: the Markdown and the JSON document.
"""

from console.report.gather import ArmFacts, AttemptFacts, Report, ReportError, attempt_triage, gather_report
from console.report.markdown import render_markdown, report_json
from console.report.words import furthest_stage

__all__ = [
    "ArmFacts",
    "AttemptFacts",
    "Report",
    "ReportError",
    "attempt_triage",
    "furthest_stage",
    "gather_report",
    "render_markdown",
    "report_json",
]
