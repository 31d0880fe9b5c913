"""The ingest path's shortcuts give what the general path gives: parsing, overlap search, uniqueness, state."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from collectors.pipeline import StatePrior
from normalizers import exposition
from normalizers.exposition import ExpositionParser
from normalizers.normalize import _pairs_distinct
from normalizers.stateful import LAST_SCHEMA, _Newest
from store import Held, IngestRun, StaleStage, commit_run, connect
from tests.test_ingest import frame, samples, written
from tests.test_normalize import normalize, reasons
from tests.test_pipeline import AT, ingest, one

PAD = "# " + "x" * 5000 + "\n"  # a comment longer than the smallest chunk: what follows lands in a new batch
XID = 'DCGM_FI_DEV_XID_ERRORS{{gpu="0",Hostname="h100-a-001"}} {value} {ts}\n'
TEMP = 'DCGM_FI_DEV_GPU_TEMP{{gpu="{gpu}",Hostname="h100-a-001",modelName="{model}"}} {value} {ts}\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "in.prom"
    path.write_text(text)
    return path


def test_a_run_searches_its_own_earlier_batches(con: duckdb.DuckDBPyConnection) -> None:
    late = frame([(3000, "m", 3.0), (4000, "m", 4.0)])
    early = frame([(1000, "m", 1.0), (3000, "m", 9.0), (4000, "m2", 5.0)])  # 3000/m is already in the run
    run = IngestRun("file", "a")
    run.add_read(5)
    run.add_samples(late, assume_unique=True)
    run.add_samples(early, assume_unique=True)
    commit_run(Held(con), run)
    assert (run.counts.stored, run.counts.duplicates) == (4, 1)
    assert samples(con) == [(1000, "m", 1.0), (3000, "m", 3.0), (4000, "m", 4.0), (4000, "m2", 5.0)]
    assert one(con, "SELECT count(*) FROM rollup_1m", []) == 2  # m and m2 in the first minute


def test_rows_stored_before_the_run_are_searched_only_inside_their_range(con: duckdb.DuckDBPyConnection) -> None:
    written(con, "a", 2, frame([(1000, "m", 1.0), (5000, "m", 5.0)]))
    run = IngestRun("file", "b")
    run.add_read(4)
    run.add_samples(frame([(9000, "m", 9.0)]), assume_unique=True)  # after what is stored: no search
    run.add_samples(frame([(3000, "m", 3.0), (5000, "m", 7.0), (6000, "m", 6.0)]), assume_unique=True)
    commit_run(Held(con), run)
    assert samples(con) == [(1000, "m", 1.0), (3000, "m", 3.0), (5000, "m", 5.0), (6000, "m", 6.0),
                            (9000, "m", 9.0)]
    assert run.counts.as_dict() == {"read": 4, "stored": 3, "rejected": 0, "duplicates": 1, "ignored": 0}


def test_pairs_are_counted_without_hashing_only_when_time_is_ordered() -> None:
    ordered = pl.DataFrame({"ts": [1, 1, 2, 2, 3], "sid": [0, 1, 0, 1, 0]})
    assert _pairs_distinct(ordered, "sid")
    assert not _pairs_distinct(ordered.with_columns(sid=pl.Series([0, 1, 0, 0, 0])), "sid")
    assert not _pairs_distinct(ordered.reverse(), "sid")  # not ordered: left to the hashing path
    assert _pairs_distinct(ordered.head(1), "sid")


def test_duplicates_are_found_when_time_goes_backwards() -> None:
    text = "".join(TEMP.format(gpu=0, model="a", value=v, ts=t)
                   for v, t in ((40, AT + 2000), (41, AT + 1000), (42, AT + 2000)))
    out, reads = normalize(text)
    assert reads == 3 and out.samples.height == 2
    assert reasons(out) == ["duplicate series in one scrape: same series and timestamp as an earlier line"]


def test_two_series_of_one_canonical_row_keep_the_first() -> None:
    # modelName is not kept, so both lines are the same canonical row
    text = "".join(TEMP.format(gpu=0, model=m, value=v, ts=AT) for m, v in (("a", 40), ("b", 41)))
    out, reads = normalize(text)
    assert reads == 2 and out.samples["value"].to_list() == [40.0] and out.folded == 1


def test_state_of_earlier_batches_answers_a_later_lookup(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    # the third sample goes back in time, so its batch asks for the state before it: the change points of
    # the first batch, staged but not yet written, must answer too
    text = (XID.format(value=48, ts=AT) + XID.format(value=0, ts=AT + 30_000) + PAD
            + XID.format(value=48, ts=AT + 15_000) + PAD)
    report = ingest(con, write(tmp_path, text), chunk=4096)
    events = con.execute("SELECT ts FROM samples WHERE metric = 'accelerator.errors'").fetchall()
    assert events == [(AT,)]  # at AT + 15 s the code is 48 again, as it was: not a new event
    assert report.counts.as_dict() == {"read": 3, "stored": 1, "rejected": 0, "duplicates": 2, "ignored": 0}
    assert con.execute("SELECT ts, value FROM error_state ORDER BY ts").fetchall() == [(AT, 48.0), (AT + 30_000, 0.0)]


def test_a_line_repeated_across_a_chunk_boundary_is_a_duplicate_in_one_scrape(con: duckdb.DuckDBPyConnection,
                                                                             tmp_path: Path) -> None:
    first, second = (TEMP.format(gpu=g, model="a", value=40 + g, ts=AT) for g in (0, 1))
    later = TEMP.format(gpu=0, model="a", value=50, ts=AT + 15_000)
    text = first + second + PAD + second.replace(" 41 ", " 99 ") + first.replace(" 40 ", " 77 ") + later
    report = ingest(con, write(tmp_path, text), chunk=4096)
    # wherever the chunks fall, the scrape at AT is read whole: its repeated series are rejected as in one chunk
    assert report.counts.as_dict() == {"read": 5, "stored": 3, "rejected": 2, "duplicates": 0, "ignored": 0}
    assert set(report.reasons) == {"duplicate series in one scrape: same series and timestamp as an earlier line"}
    assert con.execute("SELECT ts, device, value FROM samples ORDER BY ALL").fetchall() == [
        (AT, "0", 40.0), (AT, "1", 41.0), (AT + 15_000, "0", 50.0)]
    whole = tmp_path / "one"
    whole.mkdir()
    again = ingest(connect(whole / "w.duckdb"), write(whole, text), chunk=1 << 20)
    assert again.counts.as_dict() == report.counts.as_dict()


def test_the_lookup_combines_stored_and_staged_state(con: duckdb.DuckDBPyConnection) -> None:
    def change(ts: int, value: float, device: str = "0") -> pl.DataFrame:
        return pl.DataFrame({"node": ["n"], "device": [device], "source": ["s"], "ts": [ts], "value": [value]})

    written(con, "a", 0, stage=lambda run: run.add_error_state(pl.concat([change(5, 48.0), change(20, 0.0)])))
    run = IngestRun("file", "b")
    run.add_error_state(pl.concat([change(8, 79.0), change(8, 13.0), change(5, 31.0), change(3, 43.0, "1")]))
    prior = StatePrior(Held(con), run)

    def before(device: str, ts: int) -> float | None:
        got = prior(pl.DataFrame({"node": ["n"], "device": [device], "source": ["s"], "before": [ts]}))
        return got["value"].item() if got.height else None

    got = {(d, b): before(d, b) for d, b in (("0", 6), ("0", 10), ("0", 30), ("1", 4), ("1", 3))}
    # before 6: stored 48 beats the staged 31 at the same time; before 10: the staged 79 (the first at ts 8)
    assert got == {("0", 6): 48.0, ("0", 10): 79.0, ("0", 30): 0.0, ("1", 4): 43.0, ("1", 3): None}


def test_state_stored_by_another_writer_meanwhile_refuses_the_commit(con: duckdb.DuckDBPyConnection) -> None:
    keys = pl.DataFrame({"node": ["n"], "device": ["0"], "source": ["s"], "before": [10]})
    run = IngestRun("file", "late")
    prior = StatePrior(Held(con), run)
    assert prior(keys).height == 0  # nothing stored yet: the staging treats the series as new
    written(con, "meanwhile", 0, stage=lambda r: r.add_error_state(pl.DataFrame(
        {"node": ["n"], "device": ["0"], "source": ["s"], "ts": [5], "value": [48.0]})))
    run.check(prior.check)
    with pytest.raises(StaleStage, match="changed while it was staged"):
        commit_run(Held(con), run)
    assert con.execute("SELECT count(*) FROM ingest_runs").fetchone() == (1,)


def test_fresh_database_rollups_match_raw(tmp_path: Path) -> None:
    c = connect(tmp_path / "r.duckdb")
    text = "".join(TEMP.format(gpu=g, model="a", value=30 + g + i, ts=AT + i * 15_000)
                   for i in range(12) for g in range(4))
    ingest(c, write(tmp_path, text), chunk=4096)
    raw = c.execute("SELECT ts - ts % 60000, device, count(*), sum(value), min(value), max(value), "
                    "arg_max(value, ts) FROM samples GROUP BY ALL ORDER BY ALL").fetchall()
    assert c.execute("SELECT bucket, device, count, sum, min, max, last FROM rollup_1m ORDER BY ALL").fetchall() == raw
    c.close()


def test_newline_search_in_small_steps_finds_the_same_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"".join(f'm{{a="{i}",b="é x"}} {i} {AT + i}\n# TYPE m gauge\n\n'.encode() for i in range(50))
    def rows() -> list[tuple[object, ...]]:
        parser = ExpositionParser()
        batches = [parser.feed(data[:333]), parser.feed(data[333:]), parser.finish()]
        assert batches[-1].types == {"m": "gauge"}
        return [r for b in batches for r in b.samples.select("line", "key", "value", "ts_ms").rows()]
    whole = rows()
    monkeypatch.setattr(exposition, "SEARCH_BYTES", 7)  # many steps, newlines on their edges
    assert rows() == whole
    assert [r[0] for r in whole] == list(range(1, 150, 3))
    assert whole[0][1] == 'm{a="0",b="é x"}' and whole[-1][2:] == (49.0, AT + 49)


@pytest.mark.parametrize("tail", [b"", b"x", b"1234567", b"\xc3\xa9", b"abcdefgh\xc3\xa9"])
def test_non_ascii_anywhere_in_a_block_is_noticed(tail: bytes) -> None:
    block = np.frombuffer(b"0123456789abcdef" + tail, dtype=np.uint8)
    assert exposition._ascii(block) == (max(tail, default=0) < 0x80)


def test_the_newest_value_of_an_error_series_prefers_the_later_batch_on_a_tie() -> None:
    newest = _Newest.of(pl.DataFrame({"eid": [0, 1], "last_ts": [10, 10], "last": [1.0, 2.0]}).cast(
        LAST_SCHEMA), 3)
    newest.update(np.array([0, 1, 2]), np.array([10, 9, 5]), np.array([7.0, 8.0, 9.0]))
    assert newest.frame().rows() == [(0, 10, 7.0), (1, 10, 2.0), (2, 5, 9.0)]


def test_the_refresh_in_hour_slices_equals_one_aggregation(con: duckdb.DuckDBPyConnection) -> None:
    start = 1_767_225_600_000 + 17 * 60_000 + 30_500  # 17.5 minutes past an hour: slices cross hours
    rows = [(start + i * 7_000, "m" if i % 3 else "m2", float(i % 11)) for i in range(1_500)]  # about 2.9 hours
    written(con, "a", len(rows), frame(rows))
    one = ("SELECT ts - ts % 60000, metric, count(*), sum(value), min(value), max(value), arg_max(value, ts), "
           "max(ts) FROM samples GROUP BY ALL ORDER BY ALL")
    assert con.execute("SELECT bucket, metric, count, sum, min, max, last, last_ts FROM rollup_1m "
                       "ORDER BY ALL").fetchall() == con.execute(one).fetchall()
    assert con.execute("SELECT count(DISTINCT bucket) FROM rollup_1h").fetchone() == (4,)
