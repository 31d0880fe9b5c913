"""The suite's two tiers: `make test` runs what is not marked slow, `make test-slow` the rest, CI runs both."""

from __future__ import annotations

import re
import shlex
import tomllib

from tests.conftest import REPO


def recipe(target: str) -> list[str]:
    """The pytest command line of a Makefile target, split as the shell would."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert body, f"the Makefile has no target {target}"
    lines = [line.strip() for line in body[1].splitlines() if "pytest" in line]
    assert len(lines) == 1, f"{target}: expected one pytest line, got {lines}"
    return shlex.split(lines[0])


def marker_expression(argv: list[str]) -> str:
    assert argv.count("-m") == 1, argv
    return argv[argv.index("-m") + 1]


def test_the_tiers_split_the_suite_on_the_slow_marker_and_nothing_else() -> None:
    quick, slow = recipe("test"), recipe("test-slow")
    assert marker_expression(quick) == "not slow" and marker_expression(slow) == "slow"
    # Everything but the expression is the same (workers, distribution), and neither names paths, -k or
    # --deselect: so every collected test is in exactly one tier.
    strip = {"-m", "not slow", "slow"}
    assert [a for a in quick if a not in strip] == [a for a in slow if a not in strip]
    assert not [a for a in quick if a in {"-k", "--deselect", "--ignore"} or a.startswith(("tests", "--ignore="))]


def test_the_slow_marker_is_registered() -> None:
    pytest_ini = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in pytest_ini["markers"])
    assert "--strict-markers" in pytest_ini["addopts"]


def test_ci_runs_both_tiers_then_the_fuzz_sweep() -> None:
    steps = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
             if line.strip().startswith("make ")]
    assert steps == ["make test", "make test-slow", "make fuzz"]
    assert "set -eu" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
