"""The tracker on a hand-built store: long-run stability from stored telemetry with a planted fatal error and a
planted memory leak, stages and days from evidence added on the command line, and registry-named files.

30 hours of 5-minute samples from 2026-11-25 00:00 UTC (the example fleet's mlu370-a started 2026-11-24):
- mlu370-a, node mlu370-a-01, devices 0 and 1 at a flat 20 GiB; a fatal XID-like device_lost on device 1 at
  10:15, so sustained operation runs from 11:00 to the last sample at 29:55, 18.92 h;
- gaudi3-a, one device whose HBM use climbs linearly from 40 to 44 GiB over the 30 hours (a leak);
- ascend-a, one device for the first 6 hours only.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

from onboarding import read_facts
from onboarding.facts import read_facts_of
from onboarding.gates import FAIL, PASS, PENDING
from onboarding.stability import growth, stability
from pool_registry import Registry
from replay.bench import closed_loop, default_requests
from replay.candidate import Candidate
from replay.fleet import pools_by_id
from store import Held, IngestRun, commit_run, connect, save_registry
from store.evidence import add_evidence
from tests.cli import run
from tests.conftest import FLEET, REPO

T0 = int(dt.datetime(2026, 11, 25, tzinfo=dt.UTC).timestamp() * 1000)
STEP = 5 * 60_000
HOUR = 3_600_000
GIB = 1024**3


def rows() -> pl.DataFrame:
    out = []
    for k in range(360):
        ts = T0 + k * STEP
        devices = [("mlu370-a", "mlu370-a-01", "0", 20.0), ("mlu370-a", "mlu370-a-01", "1", 20.0),
                   ("gaudi3-a", "gaudi3-a-01", "0", 40.0 + 4.0 * k / 360)]
        if k < 72:
            devices.append(("ascend-a", "ascend-a-01", "0", 30.0))
        for pool, node, dev, used in devices:
            for metric, value in (("accelerator.utilization", 0.5), ("accelerator.memory.used", used * GIB),
                                  ("accelerator.memory.total", 48.0 * GIB), ("accelerator.power", 150.0),
                                  ("accelerator.temperature", 55.0)):
                out.append((ts, pool, node, dev, metric, value, "{}", True))
    out.append((T0 + 10 * HOUR + 15 * 60_000, "mlu370-a", "mlu370-a-01", "1", "accelerator.errors", 1.0,
                json.dumps({"code": "79", "error_class": "device_lost", "severity": "fatal"}), True))
    return pl.DataFrame(out, schema=["ts", "pool", "node", "device", "metric", "value", "attributes", "device_wide"],
                        orient="row")


@pytest.fixture
def store_db(db_path: Path, fleet: Registry) -> Path:
    con = connect(db_path)
    save_registry(con, fleet, str(FLEET))
    raw = rows()
    run = IngestRun("file", "hand-built")
    run.add_read(raw.height)
    run.add_samples(raw)
    commit_run(Held(con), run)
    con.close()
    return db_path


def test_stability_is_cut_by_the_planted_fatal_error(store_db: Path) -> None:
    con = connect(store_db, read_only=True)
    t = read_facts(con, "mlu370-a").telemetry
    con.close()
    out = stability(t, 24, 0.05)
    assert out.status == FAIL
    assert out.reason == ("last fatal error device_lost (code 79) on mlu370-a-01/1 in the hour from 2026-11-25 "
                          "10:00 UTC; 18.9 h of sustained operation of 24 h needed; no memory growth trend")
    shorter = stability(t, 12, 0.05)
    assert shorter.status == PASS and shorter.at_ms == T0 + 11 * HOUR + 12 * HOUR


def test_a_memory_leak_fails_stability_and_a_short_run_is_pending(store_db: Path) -> None:
    con = connect(store_db, read_only=True)
    leak, short = read_facts(con, "gaudi3-a").telemetry, read_facts(con, "ascend-a").telemetry
    con.close()
    # hourly means rise 4 GiB x 12/360 = 0.1333 GiB per hour over 29 h, against a mean of 41.994 GiB: 9.21 %
    assert growth(leak.memory, T0)["growth"].to_list() == pytest.approx([0.1333333 * 29 / 41.994444], rel=1e-5)
    out = stability(leak, 24, 0.05)
    assert out.status == FAIL and out.reason.startswith("memory grows 9.2% over 29.9 h on gaudi3-a-01/0")
    assert stability(leak, 24, 0.10).status == PASS
    pending = stability(short, 24, 0.05)
    assert pending.status == PENDING and pending.reason.startswith("5.9 h of sustained operation of 24 h needed")


def test_facts_of_many_pools_read_at_once_are_each_pools_own(store_db: Path) -> None:
    con = connect(store_db)
    run_ = IngestRun("file", "hand-built rejects")
    run_.add_read(3)
    run_.add_rejects(pl.DataFrame({"line": [1, 2, 3], "record": ["mlu370-a-01 gpu_foo 1", "gaudi3-a-01 x NaN",
                                                                 "mlu370-a-01 y"],
                                   "reason": ["unmapped metric 'gpu_foo'", "value NaN is not a number",
                                              "unparsable line"]}))
    commit_run(Held(con), run_)
    day = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    add_evidence(con, pool="mlu370-a", item="operators", role="file", name="old.csv", body="op,status\n",
                 produced_at=day)
    add_evidence(con, pool="mlu370-a", item="operators", role="file", name="new.csv", body="op,status\na,pass\n",
                 produced_at=day)
    con.close()
    pools = ("mlu370-a", "gaudi3-a", "ascend-a", "no-such-pool")
    ro = connect(store_db, read_only=True)
    together = read_facts_of(ro, pools)
    alone = {p: read_facts(ro, p) for p in pools}
    ro.close()
    # two unexplained rejects name mlu370-a's node (the first as the example); gaudi3-a's NaN is explained
    assert [together[p].rejects for p in pools] == [(2, "unmapped metric 'gpu_foo'"), (0, ""), (0, ""), (0, "")]
    assert [len(together[p].evidence) for p in pools] == [1, 0, 0, 0]
    assert together["mlu370-a"].files("operators")["file"].name == "new.csv"
    # hourly memory: 2 devices x 30 h, 1 x 30 h, 1 x 6 h, and an empty frame with the same columns
    assert [together[p].telemetry.memory.height for p in pools] == [60, 30, 6, 0]
    assert [together[p].devices_heard for p in pools] == [2, 1, 1, 0]
    assert together["mlu370-a"].telemetry.fatal["device"].to_list() == ["1"]
    assert together["gaudi3-a"].telemetry.fatal.is_empty()
    for p in pools:
        a, b = together[p], alone[p]
        assert (a.telemetry.first_ms, a.telemetry.last_ms, a.devices_heard, a.rejects, a.routed, a.gate,
                a.evidence) == (b.telemetry.first_ms, b.telemetry.last_ms, b.devices_heard, b.rejects, b.routed,
                                b.gate, b.evidence)
        for x, y in ((a.metrics, b.metrics), (a.telemetry.fatal, b.telemetry.fatal),
                     (a.telemetry.memory, b.telemetry.memory)):
            assert x.schema == y.schema and x.equals(y)
    assert together["no-such-pool"].telemetry.memory.columns == ["bucket", "node", "device", "used"]


def test_evidence_added_on_the_command_line_moves_the_pool_through_its_stages(
        store_db: Path, tmp_path: Path, fleet: Registry, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", str(store_db)]
    code, out, _ = run(capsys, *db, "--json", "onboarding", "mlu370-a")
    assert code == 0
    before = json.loads(out)[0]
    items = {i["id"]: i for i in before["items"]}
    assert items["operators"]["status"] == PENDING and "not stored; run hetpool registry load" in \
        items["operators"]["reason"]
    assert items["metrics"]["status"] == PASS and items["stability"]["status"] == FAIL
    assert before["stage"] == "inference_bringup"
    assert before["stages"][0]["days"] == 1.0  # the metrics' first hour, 2026-11-25, a day after the start

    ops = tmp_path / "ops.csv"
    ops.write_text("op,max_abs_err,tol\nmatmul,0.004,0.01\n")
    assert run(capsys, *db, "onboarding", "add-evidence", "mlu370-a", "operators", str(ops), "--at",
               "2026-11-26")[0] == 0
    spec = pools_by_id(fleet, Candidate(name="t"))["mlu370-a"]
    p = closed_loop(spec, 4, 512, 64, default_requests(4))
    bench = tmp_path / "bench.csv"
    bench.write_text(f"pool,isl,osl,concurrency,ttft_ms,tpot_ms\nmlu370-a,512,64,4,{p.ttft_ms_p50:.3f},"
                     f"{p.tpot_ms_p50:.3f}\n")
    code, out, _ = run(capsys, *db, "onboarding", "add-evidence", "mlu370-a", "benchmark", str(bench), "--at",
                       "2026-11-26")
    assert code == 0 and out.strip() == f"mlu370-a benchmark: {bench} checked and stored"
    code, out, _ = run(capsys, *db, "--json", "onboarding", "mlu370-a")
    after = json.loads(out)[0]
    assert after["stage"] == "multi_pool_inference" and after["stages_done"] == 2
    assert after["stages"][1]["days"] == 2.0
    assert after["bringup"] == {"days": 2.0, "bar_days": 3.0, "met": True}
    code, out, _ = run(capsys, *db, "onboarding", "mlu370-a")
    assert "inference bring-up reached in 2.0 days, within the three-day bar" in out


def test_a_pool_without_a_checklist_is_not_judged_against_the_bar_until_evidence_comes(
        store_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gaudi3-a: declared canary since 2026-08-10, serving, no checklist in the registry. 2026-11-26 06:00 (the
    # newest sample) is 108.25 days on: nothing dates its stages, so no verdict on the three-day bar
    db = ["--db", str(store_db)]
    code, out, _ = run(capsys, *db, "--json", "onboarding", "gaudi3-a")
    got = json.loads(out)[0]
    assert code == 0 and got["tracked"] is False and got["bringup"]["met"] is None
    code, out, _ = run(capsys, *db, "onboarding", "gaudi3-a")
    assert out.splitlines()[0] == (
        "gaudi3-a (intel Intel Gaudi 3), started 2026-08-10: declared stage canary; inference bring-up not tracked: "
        "the registry has no checklist for this pool (declared stage canary, started 108.2 days ago); add evidence "
        "with hetpool onboarding add-evidence to track it")
    assert "over the three-day bar" not in out
    ops = tmp_path / "ops.csv"
    ops.write_text("op,max_abs_err,tol\nmatmul,0.004,0.01\n")
    assert run(capsys, *db, "onboarding", "add-evidence", "gaudi3-a", "operators", str(ops))[0] == 0
    code, out, _ = run(capsys, *db, "--json", "onboarding", "gaudi3-a")
    got = json.loads(out)[0]
    assert got["tracked"] is True and got["bringup"]["met"] is False  # tracked now, and long past the bar


@pytest.mark.parametrize(("argv", "message"), [
    (["mlu370-a", "operators", "{bad}"], "{bad}:3:2: column max_abs_err: expected a number, got 'n/a'"),
    (["mlu370-a", "regression", "{bad}"], "regression takes 2 file(s) (baseline, candidate), got 1"),
    (["mlu370-a", "communication", "{bad}"], "checklist item 'communication' is judged from manual evidence"),
    (["mlu999", "operators", "{bad}"], "unknown pool 'mlu999'"),
    (["mlu370-a", "operators", "{missing}"], "{missing}: file not found (evidence of mlu370-a operators)"),
])
def test_add_evidence_refuses_bad_input_in_one_line(store_db: Path, tmp_path: Path, argv: list[str], message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("op,max_abs_err,tol\nmatmul,0.004,0.01\nsoftmax,n/a,0.001\n")
    names = {"bad": str(bad), "missing": str(tmp_path / "none.csv")}
    code, out, err = run(capsys, "--db", str(store_db), "onboarding", "add-evidence",
                         *(a.format(**names) for a in argv))
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert message.format(**names) in err


def test_registry_load_stores_the_files_it_names_and_refuses_a_malformed_one(
        db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(FLEET, fleet)
    shutil.copytree(REPO / "examples" / "onboarding", tmp_path / "onboarding")
    code, out, _ = run(capsys, "--db", str(db_path), "--json", "registry", "load", str(fleet))
    assert code == 0 and json.loads(out)["evidence_stored"] == 5
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("SELECT count(*) FROM onboarding_evidence WHERE pool = 'mlu370-a'").fetchall() == [(5,)]
    con.close()
    ops = tmp_path / "onboarding" / "mlu370-a" / "operators.csv"
    ops.write_text(ops.read_text().replace("0.0068", "0.0068,extra"))
    code, _, err = run(capsys, "--db", str(db_path), "registry", "load", str(fleet))
    assert code == 2 and f"{ops}:4:4: expected 3 values, got 4" in err
    code, _, err = run(capsys, "registry", "validate", str(fleet))
    assert code == 2 and err.strip() == f"{ops}:4:4: expected 3 values, got 4"
