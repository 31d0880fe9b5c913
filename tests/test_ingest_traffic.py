"""hetpool ingest traffic: counts reconcile, rejects are kept, re-ingest stores nothing, failures roll back."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from store import IngestCounts, IngestRun, StoreError, connect
from store.requests import read_requests
from tests.cli import run


def test_corpus_trace_ingests_once(capsys: pytest.CaptureFixture[str], db_path: Path, corpus: Path) -> None:
    trace = corpus / "traces" / "azure_AzureLLMInferenceTrace_code.csv"
    code, out, _ = run(capsys, "--db", str(db_path), "--json", "ingest", "traffic", str(trace),
                       "--model", "llama-3.1-70b", "--sla-tier", "premium")
    first = json.loads(out)
    assert code == 0
    assert (first["format"], first["read"], first["stored"], first["rejected"], first["duplicates"]) == (
        "azure", 8819, 8819, 0, 0)
    code, out, _ = run(capsys, "--db", str(db_path), "--json", "ingest", "traffic", str(trace))
    again = json.loads(out)
    assert (again["read"], again["stored"], again["duplicates"]) == (8819, 0, 8819)
    con = connect(db_path, read_only=True)
    try:
        frame = read_requests(con, trace=trace.name)
        runs = con.execute(
            "SELECT kind, read, stored, rejected, duplicates FROM ingest_runs ORDER BY run_id").fetchall()
    finally:
        con.close()
    assert frame.height == 8819
    assert set(frame["model"].unique()) == {"llama-3.1-70b"} and set(frame["sla_tier"].unique()) == {"premium"}
    assert runs == [("traffic", 8819, 8819, 0, 0), ("traffic", 8819, 0, 0, 8819)]


def test_rejects_are_kept_with_reasons(capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path) -> None:
    trace = tmp_path / "mine.csv"
    trace.write_text("arrival,in_tokens,out_tokens\n2025-01-01T00:00:00Z,10,5\n2025-01-01T00:00:01Z,-1,5\n"
                     "later,3,3\n2025-01-01T00:00:02Z,7\n")
    code, out, _ = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace), "--trace", "mine")
    assert code == 0
    assert "read 4, stored 1, rejected 3, duplicates 0" in out
    assert "line 3: negative in_tokens -1" in out
    con = connect(db_path, read_only=True)
    try:
        rejects = con.execute("SELECT line, reason FROM rejects ORDER BY line").fetchall()
    finally:
        con.close()
    assert [r[0] for r in rejects] == [3, 4, 5]
    assert rejects[1][1].startswith("unparseable arrival 'later'")


def test_a_failure_half_way_leaves_the_store_as_it_was(capsys: pytest.CaptureFixture[str], db_path: Path,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the run's requests, rejects and run row are all written, then the commit fails: nothing may remain
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_ms,in_tokens,out_tokens\n1764000000000,10,5\n1764000000001,-2,5\n1764000000002,30,5\n")
    assert run(capsys, "--db", str(db_path), "init")[0] == 0
    written = IngestRun.write

    def fails_after_writing(self: IngestRun, con: duckdb.DuckDBPyConnection) -> IngestCounts:
        written(self, con)
        assert con.execute("SELECT count(*) FROM requests").fetchall() == [(2,)]  # it did get this far
        raise StoreError("disk full")

    monkeypatch.setattr(IngestRun, "write", fails_after_writing)
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace))
    assert code == 2 and "disk full" in err
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        counts = [con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
                  for t in ("requests", "rejects", "ingest_runs")]
    finally:
        con.close()
    assert counts == [0, 0, 0]


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str], db_path: Path,
                                           tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_ms,in_tokens,out_tokens\n0,1,1\n")
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace), "--start-at", "noon")
    assert code == 2 and err.strip() == ("hetpool: error: --start-at 'noon': expected an ISO 8601 time such as "
                                         "2025-01-01T00:00:00Z")
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "traffic", str(tmp_path / "none.csv"))
    assert code == 2 and "none.csv: file not found" in err


def test_max_tokens_is_stored_and_read_back(capsys: pytest.CaptureFixture[str], db_path: Path,
                                            tmp_path: Path) -> None:
    trace = tmp_path / "limits.csv"
    trace.write_text("arrival_ms,in_tokens,out_tokens,max_tokens\n1735689600000,10,5,64\n1735689601000,10,5,\n")
    code, _, _ = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace))
    assert code == 0
    con = connect(db_path, read_only=True)
    try:
        assert read_requests(con)["max_tokens"].to_list() == [64, None]
    finally:
        con.close()


def test_images_are_stored_and_read_back(capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path) -> None:
    trace = tmp_path / "images.csv"
    trace.write_text("arrival_ms,in_tokens,out_tokens,images,image_tokens\n1735689600000,10,5,2,\n"
                     "1735689601000,10,5,,300\n1735689602000,10,5,-1,\n")
    code, _, _ = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace))
    assert code == 0
    code, _, _ = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace))  # again: nothing new
    con = connect(db_path, read_only=True)
    try:
        got = read_requests(con)
        assert got["images"].to_list() == [2, 0] and got["image_tokens"].to_list() == [0, 300]
    finally:
        con.close()
