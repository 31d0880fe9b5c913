"""hetpool profile validate: every problem of every profile file, each with file, line and field; exit 2 on any."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_cli import run

GOOD = """\
profile: tiny
detect: [tiny_]
node_labels: [host]
metrics:
  tiny_util: {metric: accelerator.utilization, unit: percent, min: 0, max: 100}
  tiny_temp: {metric: accelerator.temperature, unit: celsius}
errors:
  tiny_throttle:
    kind: bitmask
    bits: {3: thermal/recoverable}
"""

BROKEN = [  # (what, text, line, field, expected)
    ("bad unit", GOOD.replace("unit: celsius", "unit: kelvin"), 6, "metrics.tiny_temp.unit",
     "unit 'kelvin' does not convert to celsius (accelerator.temperature); expected one of: celsius"),
    ("unknown canonical metric", GOOD.replace("accelerator.temperature", "accelerator.temp"), 6,
     "metrics.tiny_temp.metric", "unknown canonical metric 'accelerator.temp'; known: accelerator.utilization"),
    ("missing metric key", GOOD.replace("{metric: accelerator.temperature, ", "{"), 6,
     "metrics.tiny_temp.metric", "missing required field"),
    ("bad scope", GOOD.replace("unit: celsius}", "unit: celsius, scope: die}"), 6, "metrics.tiny_temp.scope",
     "unknown value 'die'; expected one of: device, component"),
    ("bad bitmask bit", GOOD.replace("{3: thermal", "{70: thermal"), 10, "errors.tiny_throttle.bits.70",
     "bad bit '70'; expected a whole number from 0 to 63"),
    ("ignore colliding with a mapped name", GOOD.replace("metrics:\n", "ignore: [tiny_x, tiny_temp]\nmetrics:\n"),
     4, "ignore[1]", "'tiny_temp' is both mapped under metrics and ignored"),
    ("YAML syntax error", GOOD.replace("celsius}", "celsius"), 7, "", "YAML syntax error: expected ',' or '}'"),
]


def pattern(file: Path, line: int, field: str, expected: str) -> str:
    where = f"{re.escape(str(file))}:{line}: "
    return where + (f"{re.escape(field)}: " if field else "") + re.escape(expected)


@pytest.mark.parametrize("what, text, line, field, expected", BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_profile_names_file_line_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path, what: str,
                                                       text: str, line: int, field: str, expected: str) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    code, out, err = run(capsys, "profile", "validate", str(path))
    assert code == 2 and out == "", what
    assert any(re.match(pattern(path, line, field, expected), ln) for ln in err.splitlines()), err


def test_a_directory_lists_the_problems_of_every_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(GOOD.replace("unit: celsius", "unit: kelvin").replace(
        "unit: percent", "unit: MiB"))
    (tmp_path / "other.yaml").write_text(GOOD.replace("profile: tiny", "profile: other").replace(
        "{3: thermal", "{x: thermal"))
    (tmp_path / "fine.yaml").write_text(GOOD.replace("profile: tiny", "profile: fine"))
    (tmp_path / "notes.txt").write_text("not a profile")
    code, out, err = run(capsys, "profile", "validate", str(tmp_path))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 3, lines  # every problem, not the first one and a count of the rest
    assert any(re.match(pattern(tmp_path / "tiny.yaml", 5, "metrics.tiny_util.unit", "unit 'MiB'"), ln)
               for ln in lines)
    assert any(re.match(pattern(tmp_path / "tiny.yaml", 6, "metrics.tiny_temp.unit", "unit 'kelvin'"), ln)
               for ln in lines)
    assert any(re.match(pattern(tmp_path / "other.yaml", 10, "errors.tiny_throttle.bits.x", "bad bit 'x'"), ln)
               for ln in lines)
    assert out == f"{tmp_path / 'fine.yaml'}: profile fine valid (2 metrics, 0 derived, 1 errors, 0 ignored)\n"
    code, out, _ = run(capsys, "--json", "profile", "validate", str(tmp_path))
    data = json.loads(out)
    assert code == 2 and data["valid"] is False and len(data["problems"]) == 3
    assert [p["profile"] for p in data["profiles"]] == ["fine"]


def test_a_name_that_differs_from_the_file_is_listed_with_the_other_problems(capsys: pytest.CaptureFixture[str],
                                                                             tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(GOOD.replace("unit: celsius", "unit: kelvin"))
    code, _, err = run(capsys, "profile", "validate", str(path))
    assert code == 2
    assert re.match(pattern(path, 1, "profile", "profile name 'tiny' differs from the file name 'small.yaml'"),
                    err.splitlines()[0]), err
    assert re.match(pattern(path, 6, "metrics.tiny_temp.unit", "unit 'kelvin'"), err.splitlines()[1]), err


def test_the_shipped_profiles_validate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "profile", "validate", str(REPO / "normalizers" / "profiles"))
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert len(lines) == 9
    assert any(re.search(r"dcgm\.yaml: profile dcgm valid \(\d+ metrics, 1 derived, 7 errors, 1 ignored\)$", ln)
               for ln in lines)


def test_a_missing_path_or_an_empty_directory_is_a_problem(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    code, _, err = run(capsys, "profile", "validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and err.strip() == f"{tmp_path / 'nope.yaml'}: file not found"
    code, _, err = run(capsys, "profile", "validate", str(tmp_path))
    assert code == 2 and "no *.yaml profile files" in err
    code, _, err = run(capsys, "profile", "validate", "--help")
    assert code == 0


def test_the_documented_example_profile_validates(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    readme = (REPO / "normalizers" / "README.md").read_text()
    match = re.search(r"## A profile\n\n```yaml\n(.*?)```", readme, re.S)
    assert match is not None
    (tmp_path / "enflame.yaml").write_text(match.group(1))
    code, out, err = run(capsys, "profile", "validate", str(tmp_path / "enflame.yaml"))
    assert (code, err) == (0, "")
    assert out.endswith("profile enflame valid (3 metrics, 1 derived, 2 errors, 2 ignored)\n")
