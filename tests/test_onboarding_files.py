"""Evidence files are read only as what they claim to be: regular files under the registry's folder, of a bounded
size, and no error quotes more of them than the offending field."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from onboarding.exceptions import OnboardingError
from onboarding.files import read_file, registry_files
from pool_registry import load_registry
from tests.cli import run
from tests.conftest import REPO

OPS = "op,max_abs_err,tol\nmatmul,0.004,0.01\n"


@pytest.mark.parametrize(("path", "message"), [
    ("/dev/zero", "/dev/zero: not a regular file (evidence of p operators); evidence is a file of results"),
    ("/proc/self/environ", "/proc/self/environ: not a regular file"),
    ("/proc/self/status", "/proc/self/status: not a regular file"),
    ("/tmp", "/tmp: not a regular file"),
])
def test_what_the_kernel_serves_is_never_read(path: str, message: str) -> None:
    with pytest.raises(OnboardingError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        read_file("p", "operators", "file", Path(path), path)


def test_a_file_larger_than_the_limit_is_refused_before_it_is_read(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.csv"
    big.write_text(OPS + "x,0.1,0.2\n" * 200)
    monkeypatch.setenv("HETPOOL_MAX_EVIDENCE_MB", "0.001")  # 1,048 bytes
    with pytest.raises(OnboardingError, match=r"big.csv: 2,0\d\d bytes exceed the evidence limit of 1,048 bytes "
                                              r"\(\$HETPOOL_MAX_EVIDENCE_MB\)"):
        read_file("p", "operators", "file", big, str(big))
    monkeypatch.setenv("HETPOOL_MAX_EVIDENCE_MB", "lots")
    with pytest.raises(OnboardingError, match="HETPOOL_MAX_EVIDENCE_MB='lots': expected a number of MiB"):
        read_file("p", "operators", "file", big, str(big))


def test_an_error_quotes_a_field_never_the_file(tmp_path: Path) -> None:
    secret = "AWS_SECRET_ACCESS_KEY=" + "s" * 200
    leaky = tmp_path / "environ.csv"
    leaky.write_text(f"{secret}\0HOME=/root\0\n")
    with pytest.raises(OnboardingError) as info:
        read_file("p", "operators", "file", leaky, str(leaky))
    text = str(info.value)
    assert "s" * 41 not in text and "HOME=/root" not in text
    assert "unknown column 'AWS_SECRET_ACCESS_KEY=ssssssssssssssssss…'" in text


def fleet_copy(tmp_path: Path) -> Path:
    shutil.copy(REPO / "examples" / "fleet.yaml", tmp_path / "fleet.yaml")
    shutil.copytree(REPO / "examples" / "onboarding", tmp_path / "onboarding")
    return tmp_path / "fleet.yaml"


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "symlink"])
def test_registry_evidence_outside_its_folder_is_refused(tmp_path: Path, how: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "fleet"
    folder.mkdir()
    path = fleet_copy(folder)
    outside = tmp_path / "outside.csv"
    outside.write_text(OPS)
    named = {"dot-dot": "../outside.csv", "absolute": str(outside), "symlink": "onboarding/link.csv"}[how]
    if how == "symlink":
        os.symlink(outside, folder / "onboarding" / "link.csv")
    path.write_text(path.read_text().replace("onboarding/mlu370-a/operators.csv", named))
    reg = load_registry(path)
    with pytest.raises(OnboardingError, match=r"lies outside .*/fleet \(it is .*/outside.csv\) \(evidence of "
                                              r"mlu370-a operators\); evidence files are read under the registry's"):
        registry_files(reg, folder)
    monkeypatch.setenv("HETPOOL_EVIDENCE_ROOT", str(tmp_path))  # an explicit root lets it in
    assert len(registry_files(reg, folder)) == 5


def test_add_evidence_refuses_a_device_in_one_line(fleet_db: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETPOOL_TEST_MARKER", "do-not-print-me")
    for path in ("/dev/zero", "/proc/self/environ"):
        code, out, err = run(capsys, "--db", str(fleet_db), "onboarding", "add-evidence", "mlu370-a", "operators",
                             path)
        assert code == 2 and not out and len(err.strip().splitlines()) == 1, err
        assert f"{path}: not a regular file" in err and "do-not-print-me" not in err
