"""The fuzz sweep's case counts: under `make fuzz` every ingest path runs at least 10,000 cases."""

from __future__ import annotations

import importlib

import pytest

from tests.fuzzing import SWEEP, SWEEP_MIN_PER_PATH

MODULES = ["tests.test_fuzz_exposition", "tests.test_fuzz_promjson", "tests.test_fuzz_traffic",
           "tests.test_fuzz_evidence", "tests.test_fuzz_config"]
PATHS = {"exposition": 3, "promjson": 2, "traffic": 2, "evidence": 1, "yaml": 6}  # path: its property tests


@pytest.fixture(scope="module", autouse=True)
def imported() -> None:
    for name in MODULES:
        importlib.import_module(name)


@pytest.mark.parametrize(("path", "tests"), sorted(PATHS.items()))
def test_every_path_sweeps_at_least_10000_cases(path: str, tests: int) -> None:
    assert len(SWEEP[path]) == tests, sorted(SWEEP[path])
    assert sum(SWEEP[path].values()) >= SWEEP_MIN_PER_PATH, SWEEP[path]


def test_no_other_path_is_declared() -> None:
    assert set(SWEEP) == set(PATHS)
