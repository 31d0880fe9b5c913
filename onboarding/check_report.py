"""A `hetpool check --json` report as evidence of the "canonical metrics flowing" item, before telemetry flows.

The report says whether an exporter's output is valid exposition, which families the profiles map, ignore or do
not know, and which core canonical metrics it does not deliver. Stored with `hetpool onboarding add-evidence POOL
metrics check.json` (or named in the registry as `checks: {metrics: {report: FILE}}`), it judges the item while
the store holds no canonical metric of the pool yet; once telemetry arrives, the store judges it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import polars as pl

from onboarding.exceptions import EvidenceError
from onboarding.gates import FAIL, PASS, Outcome

FORMATS = ("openmetrics", "prometheus")
FAMILY_SCHEMA = {"name": pl.String, "type": pl.String, "samples": pl.Int64, "profile": pl.String,
                 "status": pl.String, "canonical": pl.String, "reason": pl.String}
UNKNOWN = "unknown"


@dataclass(frozen=True)
class CheckReport:
    """What the report says: the input's source and format, its errors, its families, the core metrics missing."""

    source: str
    format: str
    errors: list[dict[str, Any]]
    families: pl.DataFrame  # FAMILY_SCHEMA
    missing_core: list[str]

    @property
    def unmapped(self) -> pl.DataFrame:
        """The families no profile maps or ignores."""
        return self.families.filter(pl.col("status") == UNKNOWN)


def _need(report: dict[str, Any], key: str, kind: type, source: str) -> Any:
    value = report.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise EvidenceError(source, None, None, f"field {key!r} is missing or not a {kind.__name__}; expected "
                                                "the output of 'hetpool check --json'")
    return value


def parse_check_report(text: str, source: str = "<check report>") -> CheckReport:
    """Read a `hetpool check --json` report, or raise EvidenceError naming what is wrong."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvidenceError(source, exc.lineno, exc.colno, f"not JSON: {exc.msg}") from None
    if not isinstance(report, dict):
        raise EvidenceError(source, None, None, "expected the JSON object 'hetpool check --json' prints")
    fmt = _need(report, "format", str, source)
    if fmt not in FORMATS:
        raise EvidenceError(source, None, None, f"format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    valid = _need(report, "valid", bool, source)
    errors = _need(report, "errors", list, source)
    if valid == bool(errors):
        raise EvidenceError(source, None, None, f"valid is {str(valid).lower()} with {len(errors)} error(s)")
    missing = _need(report, "missing_core", list, source)
    rows = []
    for k, f in enumerate(_need(report, "families", list, source)):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(f.get("status"), str):
            raise EvidenceError(source, None, None, f"families[{k}] has no name or status")
        canonical = ", ".join(str(c.get("metric")) for c in f.get("canonical") or [] if isinstance(c, dict))
        rows.append({"name": f["name"], "type": str(f.get("type", "")), "samples": int(f.get("samples") or 0),
                     "profile": f.get("profile"), "status": f["status"], "canonical": canonical,
                     "reason": f.get("reason")})
    return CheckReport(str(report.get("source") or source), fmt, [e for e in errors if isinstance(e, dict)],
                       pl.DataFrame(rows, schema=FAMILY_SCHEMA), [str(m) for m in missing])


def parse_families(text: str, source: str = "<check report>") -> pl.DataFrame:
    """The report's families (the evidence loader of the metrics item)."""
    return parse_check_report(text, source).families


def judge_report(report: CheckReport, at_ms: int | None) -> Outcome:
    """PASS when the exporter's output is valid and delivers every core metric; else FAIL, saying why."""
    head = f"check report of {report.source}"
    unmapped = report.unmapped.get_column("name").to_list()
    also = f"; not mapped by any profile: {', '.join(unmapped[:5])}" + (
        f" and {len(unmapped) - 5} more" if len(unmapped) > 5 else "") if unmapped else ""
    if report.errors:
        e = report.errors[0]
        return Outcome(FAIL, f"{head}: {len(report.errors)} exposition error(s), for example line {e.get('line')} "
                             f"[{e.get('rule')}]: {e.get('message') or e.get('text')}{also}", at_ms)
    if report.missing_core:
        return Outcome(FAIL, f"{head}: missing {', '.join(report.missing_core)}{also}", at_ms)
    return Outcome(PASS, f"{head}: valid {report.format}, every core metric delivered by "
                         f"{report.families.height} families{also}", at_ms)
