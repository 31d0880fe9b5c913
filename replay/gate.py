"""The regression gate: a candidate against a baseline on the same traffic, with tolerances from YAML.

    max_cost_increase_pct: 5            # busy cost and provisioned cost may each rise at most 5 %
    max_ttft_p99_increase_pct: 10       # p99 TTFT may rise at most 10 %
    max_sla_violation_increase_pts: 1   # SLA violation rate may rise at most 1 percentage point
    max_sla_violation_rate: 0.01        # the candidate's SLA violation rate itself may be at most 1 %

The last is an absolute limit, not a comparison: `hetpool replay runway` takes it as a pool's SLA tolerance
(1 % when the gate leaves it out, or without a gate).

Any tolerance left out is not checked; at least one is required. A negative tolerance demands an improvement.

The gate compares like with like: a candidate and a baseline whose routers use different output-length
predictors (as their summaries name them, options included) fail it, with a `predictor` check saying so, since
a difference in what the routers know would pass for a difference in routing. Give both the same predictor.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pool_registry import Reader
from pool_registry.yamlread import read_text
from replay.exceptions import GateError
from replay.summary import Summary

FIELDS = ("max_cost_increase_pct", "max_ttft_p99_increase_pct", "max_sla_violation_increase_pts")
ABSOLUTE = ("max_sla_violation_rate",)   # limits on the candidate alone
DEFAULT_SLA_VIOLATION_RATE = 0.01


@dataclass(frozen=True)
class Gate:
    """Tolerances; None means the measure is not gated."""

    max_cost_increase_pct: float | None = None
    max_ttft_p99_increase_pct: float | None = None
    max_sla_violation_increase_pts: float | None = None
    max_sla_violation_rate: float | None = None

    @property
    def sla_tolerance(self) -> float:
        """The SLA violation rate a pool may reach: max_sla_violation_rate, else 1 %."""
        return DEFAULT_SLA_VIOLATION_RATE if self.max_sla_violation_rate is None else self.max_sla_violation_rate


@dataclass(frozen=True)
class Check:
    """One gated measure: both values, the change, the limit and the outcome in words."""

    name: str
    baseline: float | None
    candidate: float | None
    change: float | None
    limit: float
    unit: str
    passed: bool
    message: str


@dataclass(frozen=True)
class Verdict:
    """pass or fail, with every check; reasons are the messages of the failed ones."""

    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def verdict(self) -> str:
        """'pass' or 'fail'."""
        return "pass" if self.passed else "fail"

    @property
    def reasons(self) -> list[str]:
        """Why the gate failed (empty when it passed)."""
        return [c.message for c in self.checks if not c.passed]


def load_gate(path: str | Path) -> Gate:
    """Read and validate a gate file."""
    text = read_text(path, GateError)
    return load_gate_text(text, str(path))


def load_gate_text(text: str, source: str = "<gate>") -> Gate:
    """Validate gate YAML text; raise GateError listing every problem."""
    r = Reader(source)
    names = (*FIELDS, *ABSOLUTE)
    root = r.root(text, f"a mapping with any of: {', '.join(names)}", GateError)
    f = r.mapping(root, "", required=(), optional=names)
    if not f and not r.problems:
        r.fail(root, "", f"no tolerance given; expected any of: {', '.join(names)}")
    gate = Gate(**{k: r.optional(f, k, "", r.number, None) for k in names})
    rate = gate.max_sla_violation_rate
    if rate is not None and not 0 <= rate < 1:
        r.fail(f.get("max_sla_violation_rate", root), "max_sla_violation_rate",
               f"a share from 0 to below 1 (0.01 is 1 %), got {rate!r}")
    if r.problems:
        raise GateError(r.problems)
    return gate


def _change_pct(base: float, cand: float) -> float:
    if base == 0:
        return 0.0 if cand == 0 else float("inf")
    return (cand - base) / base * 100.0


def evaluate(gate: Gate, baseline: Summary, candidate: Summary) -> Verdict:
    """Compare two summaries under the gate's tolerances (and the same predictor)."""
    checks = []
    if baseline.predictor != candidate.predictor:
        checks.append(Check(
            "predictor", None, None, None, 0.0, "", False,
            f"predictors differ: candidate '{candidate.predictor}', baseline '{baseline.predictor}'; the gate "
            "compares runs whose routers know the same about output lengths, so give both the same predictor"))
    if gate.max_cost_increase_pct is not None:
        limit = gate.max_cost_increase_pct
        for name, b_cost, c_cost in (
                ("busy cost", baseline.busy_cost_usd, candidate.busy_cost_usd),
                ("provisioned cost", baseline.provisioned_cost_usd, candidate.provisioned_cost_usd)):
            change = _change_pct(b_cost, c_cost)
            checks.append(Check(
                name, b_cost, c_cost, change, limit, "%", change <= limit,
                f"{name} {'rose' if change > 0 else 'changed'} {change:+.2f}% (baseline ${b_cost:,.2f} -> "
                f"candidate ${c_cost:,.2f}); limit {limit:+g}%"))
    if gate.max_ttft_p99_increase_pct is not None:
        b, c = baseline.ttft_p99, candidate.ttft_p99
        limit = gate.max_ttft_p99_increase_pct
        if b is None or c is None:
            checks.append(Check("ttft_p99", b, c, None, limit, "%", False,
                                "ttft_p99 cannot be compared: a run served no request"))
        else:
            change = _change_pct(b, c)
            checks.append(Check(
                "ttft_p99", b, c, change, limit, "%", change <= limit,
                f"ttft_p99 {'rose' if change > 0 else 'changed'} {change:+.2f}% (baseline {b:.3f}s -> "
                f"candidate {c:.3f}s); limit {limit:+g}%"))
    if gate.max_sla_violation_increase_pts is not None:
        b, c = baseline.sla_violation_rate, candidate.sla_violation_rate
        change = (c - b) * 100.0
        limit = gate.max_sla_violation_increase_pts
        checks.append(Check(
            "sla_violation_rate", b, c, change, limit, "points", change <= limit,
            f"sla_violation_rate {'rose' if change > 0 else 'changed'} {change:+.2f} points "
            f"(baseline {b * 100:.2f}% -> candidate {c * 100:.2f}%); limit {limit:+g} points"))
    if gate.max_sla_violation_rate is not None:
        c, limit = candidate.sla_violation_rate, gate.max_sla_violation_rate
        checks.append(Check(
            "sla_violation_rate_max", None, c, None, limit * 100.0, "%", c <= limit,
            f"sla_violation_rate {c * 100:.2f}% against a limit of {limit * 100:g}%"))
    return Verdict(tuple(checks))
