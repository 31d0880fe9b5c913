"""The idempotent write path: one run is one transaction and every record is accounted for."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import IngestRun, StoreError


def frame(rows: list[tuple[int, str, float]], **extra: list[int]) -> pl.DataFrame:
    """Samples of one device: (ts, metric, value)."""
    data = {
        "ts": [r[0] for r in rows], "pool": ["p"] * len(rows), "node": ["n1"] * len(rows),
        "device": ["0"] * len(rows), "metric": [r[1] for r in rows], "value": [r[2] for r in rows],
        "attributes": ["{}"] * len(rows), **extra,
    }
    return pl.DataFrame(data)


def samples(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("SELECT ts, metric, value FROM samples ORDER BY ts, metric").fetchall()


def test_same_batch_twice_is_stored_once_and_counted_as_duplicates(con: duckdb.DuckDBPyConnection) -> None:
    batch = frame([(1000, "accelerator.power", 300.0), (2000, "accelerator.power", 310.0)])
    with IngestRun(con, "file", "a.prom") as run:
        run.add_read(2)
        assert run.add_samples(batch) == (2, 0)
    with IngestRun(con, "file", "a.prom") as again:
        again.add_read(2)
        assert again.add_samples(batch) == (0, 2)
    assert again.counts.as_dict() == {"read": 2, "stored": 0, "rejected": 0, "duplicates": 2}
    assert samples(con) == [(1000, "accelerator.power", 300.0), (2000, "accelerator.power", 310.0)]
    runs = con.execute("SELECT read, stored, rejected, duplicates, window_start, window_end FROM ingest_runs "
                       "ORDER BY run_id").fetchall()
    assert runs == [(2, 2, 0, 0, 1000, 2000), (2, 0, 0, 2, 1000, 2000)]


def test_duplicates_inside_one_batch_keep_the_first(con: duckdb.DuckDBPyConnection) -> None:
    batch = frame([(1000, "m", 1.0), (1000, "m", 2.0), (1000, "m2", 3.0)])
    with IngestRun(con, "file", "a") as run:
        run.add_read(3)
        assert run.add_samples(batch) == (2, 1)
    assert samples(con) == [(1000, "m", 1.0), (1000, "m2", 3.0)]


def test_attributes_are_part_of_the_key(con: duckdb.DuckDBPyConnection) -> None:
    batch = frame([(1000, "accelerator.errors", 1.0)] * 2).with_columns(
        pl.Series("attributes", ['{"code":"79"}', '{"code":"48"}']))
    with IngestRun(con, "file", "a") as run:
        run.add_read(2)
        assert run.add_samples(batch) == (2, 0)


def test_n_src_weights_account_for_folded_records(con: duckdb.DuckDBPyConnection) -> None:
    batch = frame([(1000, "accelerator.memory.used", 1.0), (1000, "accelerator.memory.total", 9.0)], n_src=[1, 2])
    with IngestRun(con, "file", "a") as run:
        run.add_read(3)
        assert run.add_samples(batch) == (3, 0)
    assert run.rows_stored == 2
    with IngestRun(con, "file", "a") as run:
        run.add_read(3)
        assert run.add_samples(batch) == (0, 3)


def test_failure_inside_a_run_leaves_the_store_as_it_was(con: duckdb.DuckDBPyConnection) -> None:
    with IngestRun(con, "file", "first") as run:
        run.add_read(1)
        run.add_samples(frame([(1, "m", 1.0)]))
    before = (samples(con), con.execute("SELECT count(*) FROM ingest_runs").fetchone())
    with pytest.raises(RuntimeError, match="disk on fire"), IngestRun(con, "file", "second") as run:
        run.add_read(3)
        run.add_samples(frame([(2, "m", 2.0), (3, "m", 3.0)]))
        run.add_rejects(pl.DataFrame({"line": [7], "record": ["garbage"], "reason": ["bad"]}))
        raise RuntimeError("disk on fire")
    assert (samples(con), con.execute("SELECT count(*) FROM ingest_runs").fetchone()) == before
    assert con.execute("SELECT count(*) FROM rejects").fetchone() == (0,)


def test_lost_records_fail_the_run_and_roll_back(con: duckdb.DuckDBPyConnection) -> None:
    lost = r"lost records: read 5 != stored 2 \+ rejected 0 \+ duplicates 0"
    with pytest.raises(StoreError, match=lost), IngestRun(con, "file", "leaky") as run:
        run.add_read(5)
        run.add_samples(frame([(1, "m", 1.0), (2, "m", 2.0)]))
    assert samples(con) == []


def test_rejects_are_kept_with_reason_and_truncated(con: duckdb.DuckDBPyConnection) -> None:
    with IngestRun(con, "file", "bad.prom") as run:
        run.add_read(2)
        run.add_rejects(pl.DataFrame({"line": [3, 9], "record": ["x" * 10_000, "..."],
                                      "reason": ["line too long", "not a sample"]}))
    rows = con.execute("SELECT source, line, length(record), reason FROM rejects ORDER BY line").fetchall()
    assert rows == [("bad.prom", 3, 500, "line too long"), ("bad.prom", 9, 3, "not a sample")]


def test_null_fields_are_refused(con: duckdb.DuckDBPyConnection) -> None:
    bad = frame([(1, "m", 1.0)]).with_columns(pl.lit(None, dtype=pl.String).alias("node"))
    with pytest.raises(StoreError, match="null field"), IngestRun(con, "file", "x") as run:
        run.add_read(1)
        run.add_samples(bad)


def test_versions_widen_first_and_last_seen(con: duckdb.DuckDBPyConnection) -> None:
    def versions(ts: list[int], version: str) -> pl.DataFrame:
        return pl.DataFrame({"pool": "p", "node": "n1", "device": "", "component": "driver", "version": version,
                             "ts": ts})

    with IngestRun(con, "file", "a") as run:
        run.add_versions(versions([5000, 3000], "550.144.03"))
    with IngestRun(con, "file", "b") as run:
        run.add_versions(versions([1000, 9000], "550.144.03"))
        run.add_versions(versions([9500], "560.35.03"))
    assert con.execute("SELECT version, first_seen, last_seen FROM versions ORDER BY version").fetchall() == [
        ("550.144.03", 1000, 9000), ("560.35.03", 9500, 9500)]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["a", "b"]), st.floats(-1e6, 1e6)), min_size=1,
                max_size=60), st.integers(0, 60))
def test_overlapping_runs_store_the_distinct_union(tmp_path_factory: pytest.TempPathFactory,
                                                   rows: list[tuple[int, str, float]], cut: int) -> None:
    from store import connect

    con = connect(tmp_path_factory.mktemp("h") / "h.duckdb")
    first, second = rows[: max(cut, 1)], rows[max(cut, 1) // 2:]
    total_read = total_stored = 0
    for part in (first, second):
        with IngestRun(con, "file", "x") as run:
            run.add_read(len(part))
            run.add_samples(frame(part))
        total_read += run.counts.read
        total_stored += run.counts.stored
    keys = {(t, m) for t, m, _ in rows[: max(cut, 1)] + rows[max(cut, 1) // 2:]}
    assert {(t, m) for t, m, _ in samples(con)} == keys
    assert total_stored == len(keys)
    con.close()
