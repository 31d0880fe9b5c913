"""Rejects held within bounds (canonical/rejectlog.py, store/ingest.py's caps): every reject counted exactly, a
sample of each reason kept, and a small hostile input costing little memory (measured in a subprocess)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from canonical.rejectlog import KEEP_PER_REASON, KEEP_PER_RUN, MAX_REASONS, OTHER, RejectLog
from store.ingest import IngestRun
from tests.cli import run
from tests.conftest import REPO


@given(st.lists(st.integers(0, 5), max_size=300), st.integers(1, 20), st.integers(1, 50))
def test_every_reject_is_counted_and_the_kept_ones_fit_their_caps(reasons: list[int], per_reason: int,
                                                                 keep: int) -> None:
    log = RejectLog(per_reason, keep)
    for i, r in enumerate(reasons):
        log.append({"line": i + 1, "record": f"r{r}", "reason": f"reason {r}"})
    assert len(log) == len(reasons) == sum(log.by_reason.values())
    kept = log.frame()
    assert kept.height + sum(log.unkept.values()) == len(reasons)
    assert kept.height <= keep
    assert all(n <= per_reason for n in kept["reason"].value_counts()["count"])
    assert kept["line"].is_sorted()


def test_past_the_distinct_reasons_cap_the_rest_count_as_other() -> None:
    log = RejectLog()
    for i in range(MAX_REASONS + 5):
        log.append({"line": i + 1, "record": "x", "reason": f"bad value {i}"})
    assert log.unkept == {OTHER: 5} and len(log.by_reason) == MAX_REASONS + 1


def test_a_run_keeps_examples_up_to_its_caps_across_batches() -> None:
    run_ = IngestRun("file", "f.prom")
    line = 0
    for batch in range(4):  # batches of 2,000 rejects of one reason and 4,000 of 400 new reasons
        rows = [{"line": (line := line + 1), "record": "a", "reason": "same"} for _ in range(2_000)]
        rows += [{"line": (line := line + 1), "record": "b", "reason": f"value {i % 400 + 400 * batch}"}
                 for i in range(4_000)]
        run_.add_rejects(pl.DataFrame(rows), {"unkept upstream": 7})
    kept = pl.concat(run_._rejects)
    assert run_.staged.rejected == 4 * (6_000 + 7)
    assert kept.height == KEEP_PER_RUN
    assert kept.filter(pl.col("reason") == "same").height == KEEP_PER_REASON
    note = run_.sampled_note()
    assert note is not None and note.startswith(f"24,028 records rejected: {KEEP_PER_RUN:,} kept as examples")


def test_an_all_reject_file_is_counted_exactly_and_sampled_in_the_store(capsys: pytest.CaptureFixture[str],
                                                                       fleet_db: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.prom.gz"
    path.write_bytes(gzip.compress(b"}\n" * 30_000 + b"9bad 1\n" * 2_000 + b"ok_metric{ 1\n" * 10))
    code, out, err = run(capsys, "--db", str(fleet_db), "--json", "ingest", "file", str(path), "--pool", "h100-a")
    assert code == 0, err
    got = json.loads(out)
    assert got["read"] == got["rejected"] == 32_010
    con = duckdb.connect(str(fleet_db), read_only=True)
    by_reason = dict(con.execute("SELECT reason, count(*) FROM rejects GROUP BY reason").fetchall())
    con.close()
    assert sorted(by_reason.values()) == [10, KEEP_PER_REASON, KEEP_PER_REASON]
    assert any("32,010 records rejected: 2,010 kept as examples" in w for w in got["warnings"]), got


# The child's own high-water mark (VmHWM), not ru_maxrss: Linux carries that across exec, so a child of a
# test worker that has grown past 1 GiB would report the worker's peak.
MEASURE = """
import sys
from app.cli import main
code = main(sys.argv[1:])
hwm = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
print("peak_kib", hwm, "code", code)
"""


@pytest.mark.slow
def test_a_small_all_reject_gz_peaks_under_500_mb(fleet_db: Path, tmp_path: Path) -> None:
    path = tmp_path / "bomb.prom.gz"
    path.write_bytes(gzip.compress(b"}\n" * 8_000_000, 9))  # 16 MB of one bad line, about 16 KiB compressed
    assert path.stat().st_size < 20_000
    done = subprocess.run([sys.executable, "-c", MEASURE, "--db", str(fleet_db), "ingest", "file", str(path),
                           "--pool", "h100-a"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert "read 8000000, stored 0, rejected 8000000" in done.stdout, done.stderr
    peak_mib = int(done.stdout.split("peak_kib ")[1].split()[0]) / 1024
    assert peak_mib < 500, f"peak {peak_mib:.0f} MiB"
