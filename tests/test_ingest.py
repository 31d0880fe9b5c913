"""The idempotent write path: a run is staged, then written in one transaction, and every record is accounted for."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import Held, IngestRun, StaleStage, StoreError, commit_run


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


def written(con: duckdb.DuckDBPyConnection, source: str, read: int, *batches: pl.DataFrame,
            stage: Callable[[IngestRun], None] | None = None) -> IngestRun:
    """Stage `read` records and the batches, then commit them as one run."""
    run = IngestRun("file", source)
    run.add_read(read)
    for batch in batches:
        run.add_samples(batch)
    if stage is not None:
        stage(run)
    commit_run(Held(con), run)
    return run


def counts(run: IngestRun) -> tuple[int, int]:
    return run.counts.stored, run.counts.duplicates


def test_same_batch_twice_is_stored_once_and_counted_as_duplicates(con: duckdb.DuckDBPyConnection) -> None:
    batch = frame([(1000, "accelerator.power", 300.0), (2000, "accelerator.power", 310.0)])
    assert counts(written(con, "a.prom", 2, batch)) == (2, 0)
    again = written(con, "a.prom", 2, batch)
    assert again.counts.as_dict() == {"read": 2, "stored": 0, "rejected": 0, "duplicates": 2, "ignored": 0}
    assert samples(con) == [(1000, "accelerator.power", 300.0), (2000, "accelerator.power", 310.0)]
    runs = con.execute("SELECT read, stored, rejected, duplicates, window_start, window_end FROM ingest_runs "
                       "ORDER BY run_id").fetchall()
    assert runs == [(2, 2, 0, 0, 1000, 2000), (2, 0, 0, 2, 1000, 2000)]


def test_nothing_is_visible_before_the_commit(con: duckdb.DuckDBPyConnection) -> None:
    run = IngestRun("file", "a")
    run.add_read(1)
    run.add_samples(frame([(1000, "m", 1.0)]))
    assert samples(con) == [] and con.execute("SELECT count(*) FROM ingest_runs").fetchone() == (0,)
    commit_run(Held(con), run)
    assert samples(con) == [(1000, "m", 1.0)] and run.run_id == 1


def test_duplicates_inside_one_batch_keep_the_first(con: duckdb.DuckDBPyConnection) -> None:
    run = written(con, "a", 3, frame([(1000, "m", 1.0), (1000, "m", 2.0), (1000, "m2", 3.0)]))
    assert counts(run) == (2, 1)
    assert samples(con) == [(1000, "m", 1.0), (1000, "m2", 3.0)]


def test_attributes_are_part_of_the_key(con: duckdb.DuckDBPyConnection) -> None:
    batch = frame([(1000, "accelerator.errors", 1.0)] * 2).with_columns(
        pl.Series("attributes", ['{"code":"79"}', '{"code":"48"}']))
    assert counts(written(con, "a", 2, batch)) == (2, 0)


def test_n_src_weights_account_for_folded_records(con: duckdb.DuckDBPyConnection) -> None:
    batch = frame([(1000, "accelerator.memory.used", 1.0), (1000, "accelerator.memory.total", 9.0)], n_src=[1, 2])
    run = written(con, "a", 3, batch)
    assert counts(run) == (3, 0) and run.rows_stored == 2
    assert counts(written(con, "a", 3, batch)) == (0, 3)


def test_failure_inside_a_commit_leaves_the_store_as_it_was(con: duckdb.DuckDBPyConnection) -> None:
    written(con, "first", 1, frame([(1, "m", 1.0)]))
    before = (samples(con), con.execute("SELECT count(*) FROM ingest_runs").fetchone())

    def on_fire(_con: duckdb.DuckDBPyConnection, _run: IngestRun) -> None:
        raise RuntimeError("disk on fire")

    def stage(run: IngestRun) -> None:
        run.add_rejects(pl.DataFrame({"line": [7], "record": ["garbage"], "reason": ["bad"]}))
        run.also(on_fire)  # the last thing before the commit: everything else was already inserted

    with pytest.raises(RuntimeError, match="disk on fire"):
        written(con, "second", 3, frame([(2, "m", 2.0), (3, "m", 3.0)]), stage=stage)
    assert (samples(con), con.execute("SELECT count(*) FROM ingest_runs").fetchone()) == before
    assert con.execute("SELECT count(*) FROM rejects").fetchone() == (0,)


def test_a_refused_commit_can_be_written_again_with_the_same_counts(con: duckdb.DuckDBPyConnection) -> None:
    attempts = []

    def stale_once(_con: duckdb.DuckDBPyConnection, _run: IngestRun) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise StaleStage("changed meanwhile")

    run = IngestRun("file", "a")
    run.add_read(3)
    run.add_samples(frame([(1, "m", 1.0), (1, "m", 1.5), (2, "m", 2.0)]))
    run.also(stale_once)
    with pytest.raises(StaleStage):
        commit_run(Held(con), run)
    assert samples(con) == []
    commit_run(Held(con), run)
    assert run.counts.as_dict() == {"read": 3, "stored": 2, "rejected": 0, "duplicates": 1, "ignored": 0}
    assert con.execute("SELECT read, stored, duplicates FROM ingest_runs").fetchall() == [(3, 2, 1)]


def test_lost_records_fail_the_run_and_roll_back(con: duckdb.DuckDBPyConnection) -> None:
    lost = r"lost records: read 5 != stored 2 \+ rejected 0 \+ duplicates 0 \+ ignored 0"
    with pytest.raises(StoreError, match=lost):
        written(con, "leaky", 5, frame([(1, "m", 1.0), (2, "m", 2.0)]))
    assert samples(con) == []


def test_rejects_are_kept_with_reason_and_truncated(con: duckdb.DuckDBPyConnection) -> None:
    written(con, "bad.prom", 2, stage=lambda run: run.add_rejects(pl.DataFrame(
        {"line": [3, 9], "record": ["x" * 10_000, "..."], "reason": ["line too long", "not a sample"]})))
    rows = con.execute("SELECT source, line, length(record), reason FROM rejects ORDER BY line").fetchall()
    assert rows == [("bad.prom", 3, 500, "line too long"), ("bad.prom", 9, 3, "not a sample")]


def test_null_fields_are_refused_while_staging(con: duckdb.DuckDBPyConnection) -> None:
    bad = frame([(1, "m", 1.0)]).with_columns(pl.lit(None, dtype=pl.String).alias("node"))
    with pytest.raises(StoreError, match="null field"):
        IngestRun("file", "x").add_samples(bad)


def test_versions_widen_first_and_last_seen(con: duckdb.DuckDBPyConnection) -> None:
    def versions(ts: list[int], version: str) -> pl.DataFrame:
        return pl.DataFrame({"pool": "p", "node": "n1", "device": "", "component": "driver", "version": version,
                             "ts": ts})

    written(con, "a", 0, stage=lambda run: run.add_versions(versions([5000, 3000], "550.144.03")))

    def second(run: IngestRun) -> None:
        run.add_versions(versions([1000, 9000], "550.144.03"))
        run.add_versions(versions([9500], "560.35.03"))

    written(con, "b", 0, stage=second)
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
        run = written(con, "x", len(part), frame(part))
        total_read += run.counts.read
        total_stored += run.counts.stored
    keys = {(t, m) for t, m, _ in rows[: max(cut, 1)] + rows[max(cut, 1) // 2:]}
    assert {(t, m) for t, m, _ in samples(con)} == keys
    assert total_stored == len(keys)
    con.close()
