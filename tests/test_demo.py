"""`hetpool demo`: built through the pipeline, the story is in the data, and the same seed gives the same database."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from pathlib import Path

import duckdb
import polars as pl
import pytest

from app.cli import main
from app.demo.story import CLOCK_MHZ, layout, scale_registry
from pool_registry import Registry
from store import connect
from tests.conftest import DEMO_ARGS

END_MS = int(dt.datetime(2026, 11, 29, 8, tzinfo=dt.UTC).timestamp() * 1000)  # the fixture's --end
DAY_MS = 86_400_000


@pytest.fixture
def demo(demo_db: Path) -> duckdb.DuckDBPyConnection:
    con = connect(demo_db, read_only=True)
    yield con
    con.close()


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None) -> list[tuple]:
    return con.execute(sql, params or []).fetchall()


def test_everything_came_through_the_pipeline_without_a_reject(demo: duckdb.DuckDBPyConnection) -> None:
    runs = rows(demo, "SELECT kind, count(*), sum(read), sum(stored + rejected + duplicates + ignored), sum(rejected) "
                      "FROM ingest_runs GROUP BY kind ORDER BY kind")
    assert [r[0] for r in runs] == ["demo", "traffic"]
    for kind, n, read, accounted, rejected in runs:
        assert n > 0 and read == accounted and rejected == 0, kind
    assert rows(demo, "SELECT count(*) FROM rejects") == [(0,)]
    # 6 pools x 2 nodes, less the onboarding pool's second node; every sample carries its exporter's source
    nodes = rows(demo, "SELECT count(DISTINCT node) FROM samples")[0][0]
    assert nodes == 11


@pytest.mark.parametrize("pool", ["h100-a", "mi300x-a", "ascend-a", "gaudi3-a", "mlu370-a", "h100-vl"])
def test_each_vendor_dialect_normalizes_to_the_same_canonical_metrics(demo: duckdb.DuckDBPyConnection,
                                                                     pool: str) -> None:
    got = {r[0] for r in rows(demo, "SELECT DISTINCT metric FROM samples WHERE pool = ?", [pool])}
    device = {"accelerator.utilization", "accelerator.memory.used", "accelerator.memory.total",
              "accelerator.power", "accelerator.temperature", "accelerator.clock"}
    assert device <= got
    serving = {"serving.time_to_first_token", "serving.request.duration", "serving.tokens.prompt",
               "serving.tokens.generated", "serving.requests", "serving.requests.running"}
    if pool == "mlu370-a":
        assert not got & serving  # still onboarding: exporter only
    else:
        assert serving <= got
    # units: HBM totals come out as the chips' capacities in bytes whatever the vendor wrote (MiB, MB, B)
    total = rows(demo, "SELECT max(value) FROM samples WHERE pool = ? AND metric = 'accelerator.memory.total'",
                 [pool])[0][0]
    capacity_gib = {"h100-a": 80, "mi300x-a": 192, "ascend-a": 64, "gaudi3-a": 128, "mlu370-a": 48, "h100-vl": 80}[pool]
    assert total / 1024**3 == pytest.approx(capacity_gib, rel=0.01)


def test_one_node_loses_a_gpu_again_and_again(demo: duckdb.DuckDBPyConnection) -> None:
    events = rows(demo, "SELECT node, json_extract_string(attributes, '$.code') AS code, "
                        "json_extract_string(attributes, '$.error_class'), json_extract_string(attributes, "
                        "'$.severity'), count(*) FROM samples WHERE metric = 'accelerator.errors' "
                        "AND json_extract_string(attributes, '$.severity') = 'fatal' GROUP BY ALL ORDER BY ALL")
    assert {e[0] for e in events} == {"h100-a-02"}
    by_code = {e[1]: e for e in events}
    assert by_code["79"][2:4] == ("device_lost", "fatal") and by_code["79"][4] >= 2  # recurring XID 79
    # a double-bit ECC error: the XID 48 and the volatile counter rising with it are one incident
    assert by_code["48+ecc_dbe_volatile"][2:5] == ("memory_uncorrectable", "fatal", 1)
    assert set(by_code) == {"79", "48+ecc_dbe_volatile"}
    # after the last episode the GPU stays off the bus: no sample in the last two hours
    last = rows(demo, "SELECT max(ts) FROM samples WHERE node = 'h100-a-02' AND device = '0'")[0][0]
    assert last < END_MS - 2 * 3_600_000


@pytest.mark.parametrize(("pool", "recoverable", "informational"), [
    ("h100-a", {"13"}, {"63", "ecc_sbe_volatile", "pcie_replay"}),                          # XIDs, counters
    ("mi300x-a", {"30"}, {"25", "ecc_correct", "pcie_replay"}),                             # AFIDs by severity
    ("ascend-a", {"80C98008"}, {"81A3880C", "hbm_ecc_single_bit"}),                         # DCMI fault codes
    ("gaudi3-a", {"pending_rows_double_bit_ecc"}, {"pending_rows_single_bit_ecc", "pcie_replay"}),
    ("mlu370-a", {"8"}, {"ecc_corrected", "d2d_crc"}),                                      # an XID counter
])
def test_every_vendor_reports_its_everyday_errors(demo: duckdb.DuckDBPyConnection, pool: str,
                                                  recoverable: set[str], informational: set[str]) -> None:
    found = rows(demo, "SELECT json_extract_string(attributes, '$.severity'), json_extract_string(attributes, "
                       "'$.code') FROM samples WHERE metric = 'accelerator.errors' AND pool = ? "
                       "AND json_extract_string(attributes, '$.severity') <> 'fatal' GROUP BY ALL", [pool])
    by = {sev: {code for s, code in found if s == sev} for sev in ("recoverable", "informational")}
    assert by == {"recoverable": recoverable, "informational": informational}


def test_two_nodes_drifted_from_the_declared_driver(demo: duckdb.DuckDBPyConnection) -> None:
    newest = rows(demo, "SELECT pool, node, arg_max(version, last_seen) FROM versions WHERE component = 'driver' "
                        "GROUP BY pool, node ORDER BY pool, node")
    declared = {"h100-a": "550.144.03", "mi300x-a": "6.10.5", "gaudi3-a": "1.22.1", "mlu370-a": "6.2.10",
                "h100-vl": "550.144.03"}
    drifted = [(pool, node, v) for pool, node, v in newest if v != declared[pool]]
    assert drifted == [("gaudi3-a", "gaudi3-a-01", "1.22.2"), ("mi300x-a", "mi300x-a-02", "6.12.12")]
    # they ran the declared driver before the upgrade
    assert rows(demo, "SELECT count(*) FROM versions WHERE node = 'mi300x-a-02' AND version = '6.10.5'") == [(1,)]


def test_one_pool_throttles_when_hot(demo: duckdb.DuckDBPyConnection) -> None:
    minutes = pl.DataFrame(rows(demo, """
        SELECT pool, node, device, bucket,
            avg(avg) FILTER (WHERE metric = 'accelerator.temperature') AS temp,
            avg(avg) FILTER (WHERE metric = 'accelerator.clock') AS clock
        FROM rollup_1m WHERE metric IN ('accelerator.temperature', 'accelerator.clock') AND device <> ''
        GROUP BY ALL"""), schema=["pool", "node", "device", "bucket", "temp", "clock"], orient="row").drop_nulls()
    ascend = minutes.filter(pl.col("pool") == "ascend-a")
    top = CLOCK_MHZ["ascend-910b"] * 1e6
    hot = ascend.filter(pl.col("temp") >= 90)
    assert hot.height > 60 and hot["clock"].max() < 0.9 * top        # every hot minute runs slow
    assert ascend.filter(pl.col("temp") < 80)["clock"].min() == top   # cool busy minutes at the top clock
    assert minutes.filter(pl.col("pool") != "ascend-a")["temp"].max() < 85


def test_the_onboarding_pool_reports_partly_and_late(demo: duckdb.DuckDBPyConnection) -> None:
    (first, devices), = rows(demo, "SELECT min(ts), count(DISTINCT (node, device)) FROM samples "
                                   "WHERE pool = 'mlu370-a'")
    assert devices == 1 and first >= END_MS - DAY_MS + 0.35 * DAY_MS - 60_000
    assert rows(demo, "SELECT count(*) FROM requests WHERE obs_pool = 'mlu370-a'") == [(0,)]


def test_load_is_diurnal(demo: duckdb.DuckDBPyConnection) -> None:
    by_hour = dict(rows(demo, "SELECT (bucket % 86400000) // 3600000, sum(sum) / sum(count) FROM rollup_1h "
                              "WHERE metric = 'accelerator.utilization' AND pool = 'h100-a' GROUP BY 1"))
    assert by_hour[15] > 2 * by_hour[3]
    arrivals = dict(rows(demo, "SELECT (arrival_ms % 86400000) // 3600000, count(*) FROM requests GROUP BY 1"))
    assert arrivals[15] > 2.5 * arrivals[3]


def test_traffic_is_azure_shaped_with_observed_latencies(demo: duckdb.DuckDBPyConnection) -> None:
    r = pl.DataFrame(rows(demo, "SELECT in_tokens, out_tokens, obs_pool, obs_ttft_s, obs_e2e_s, outcome, model "
                                "FROM requests"),
                     schema=["in", "out", "pool", "ttft", "e2e", "outcome", "model"], orient="row")
    assert r.height > 10_000
    # a 31 % code / 69 % conversation mixture of the Azure 2023 trace: prompt median between the files'
    # medians (1020 and 1469), output median between theirs (13 and 129)
    assert 1020 < r["in"].median() < 1469 and 13 < r["out"].median() < 129
    ok = r.filter(pl.col("outcome") == "ok")
    # a one-token answer ends with its first token; every longer one takes longer than its first token
    assert ok["ttft"].null_count() == 0 and (ok["e2e"] >= ok["ttft"]).all()
    assert (ok.filter(pl.col("out") > 1)["e2e"] > ok.filter(pl.col("out") > 1)["ttft"]).all()
    assert set(r.filter(pl.col("outcome") == "error")["pool"]) == {"h100-a"}  # only the failing node's replica
    assert set(zip(r["pool"], r["model"], strict=True)) == {
        ("h100-a", "llama-3.1-70b"), ("ascend-a", "llama-3.1-70b"), ("gaudi3-a", "llama-3.1-70b"),
        ("mi300x-a", "qwen3-235b-a22b"), ("h100-vl", "qwen2.5-vl-7b")}


def test_the_vision_language_pool_serves_images_and_a_replay_prices_its_encoder(demo: duckdb.DuckDBPyConnection,
                                                                               demo_db: Path) -> None:
    """Only the VLM pool's requests carry images, in the demo's mix (none 30 %, one 50 %, two 15 %, four 5 %: a mean
    of 1.0). Replayed, each request's encoder time is its images x 1024 patches (448 px in 14 px patches) x 2 x
    0.676e9 FLOPs at the H100's 989 TFLOP/s x the registry's mfu 0.45 = 3.111 ms an image."""
    from replay import Candidate, run_replay
    from store import require_registry
    from store.requests import read_requests

    by_pool = dict(rows(demo, "SELECT obs_pool, avg(images) FROM requests GROUP BY 1"))
    assert {p for p, mean in by_pool.items() if mean} == {"h100-vl"}
    assert by_pool["h100-vl"] == pytest.approx(1.0, rel=0.05)
    share = rows(demo, "SELECT avg((images = 0)::INT) FROM requests WHERE obs_pool = 'h100-vl'")[0][0]
    assert share == pytest.approx(0.3, abs=0.02)
    con = connect(demo_db, read_only=True)
    try:
        registry, requests = require_registry(con), read_requests(con)
    finally:
        con.close()
    hour = requests.filter(pl.col("arrival_ms") < requests["arrival_ms"].min() + 3_600_000)
    result = run_replay(Candidate(name="registry"), hour, registry, 0)
    vl = result.requests.filter(pl.col("pool") == "h100-vl")
    per_image = 1024 * 2 * 0.676e9 / (989e12 * 0.45)
    carrying = vl.filter(pl.col("images") > 0)
    assert carrying.height > 100
    assert (carrying["encode_s"] / carrying["images"]).to_list() == pytest.approx([per_image] * carrying.height)
    assert (carrying["image_tokens"] == carrying["images"] * 256).all()
    pools = result.summary.pools
    assert 0 < pools["h100-vl"].encode_share < 0.5 and pools["h100-a"].encode_share == 0.0
    assert result.summary.ttft_split["encode_s"] > 0


def test_engine_counters_agree_with_the_requests(demo: duckdb.DuckDBPyConnection) -> None:
    """The engines counted the requests the requests table holds (the few still running at the end excepted)."""
    last = pl.DataFrame(rows(demo, "SELECT pool, attributes, arg_max(value, ts) FROM samples "
                                   "WHERE metric = 'serving.requests' GROUP BY ALL"),
                        schema=["pool", "attributes", "last"], orient="row").with_columns(
        pl.col("attributes").str.json_path_match("$.outcome").alias("outcome"))
    served = dict(rows(demo, "SELECT obs_pool, count(*) FROM requests GROUP BY 1"))
    for pool, n in served.items():
        mine = last.filter(pl.col("pool") == pool)
        # SGLang counts all requests in one series (outcome all); vLLM one series per finished reason
        counted = mine.filter(pl.col("outcome") == "all") if (mine["outcome"] == "all").any() else mine
        assert counted["last"].sum() == pytest.approx(n, rel=0.01), pool


def digest(path: Path) -> str:
    con = connect(path, read_only=True)
    try:
        h = hashlib.sha256()
        for sql in ("SELECT * FROM samples ORDER BY ts, pool, node, device, metric, attributes",
                    "SELECT * FROM requests ORDER BY trace, seq",
                    "SELECT * FROM versions ORDER BY ALL",
                    "SELECT body FROM registry_snapshots ORDER BY snapshot_id"):
            # the registry names its evidence beside the fleet file, in a folder named after the database
            h.update(con.sql(sql).pl().write_ndjson().replace(f"{path.stem}.evidence", "DB.evidence").encode())
        return h.hexdigest()
    finally:
        con.close()


@pytest.mark.slow  # builds two demos
def test_the_same_seed_builds_the_same_database(tmp_path: Path) -> None:
    small = ["demo", "--days", "0.25", "--devices-per-pool", "1", "--end", "2026-11-29T08:00:00Z"]
    built = {}
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        path = tmp_path / f"{name}.duckdb"
        assert main(["--db", str(path), *small, "--seed", seed]) == 0
        built[name] = digest(path)
    assert built["a"] == built["b"]
    assert built["a"] != built["c"]


@pytest.mark.parametrize(("args", "message"), [
    (["--days", "0"], "--days 0 is out of range"),
    (["--days", "40"], "--days 40 is out of range"),
    (["--devices-per-pool", "0"], "--devices-per-pool 0 is out of range"),
    (["--interval", "7s"], "--interval 7s must divide an hour"),
    (["--interval", "20m"], "--interval 1200s must divide an hour"),
    (["--registry", "nope.yaml"], "nope.yaml"),
])
def test_bad_arguments_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                           message: str) -> None:
    assert main(["--db", str(tmp_path / "x.duckdb"), "demo", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_database_with_samples_is_refused_unless_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            demo_db: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(demo_db.read_bytes())
    assert main(["--db", str(copy), "demo", *DEMO_ARGS]) == 2
    assert "already holds" in capsys.readouterr().err
    assert main(["--db", str(copy), "demo", "--replace", "--days", "0.1", "--devices-per-pool", "1",
                 "--end", "2026-11-29T08:00:00Z"]) == 0
    con = connect(copy, read_only=True)
    try:
        assert rows(con, "SELECT count(DISTINCT node) FROM samples")[0][0] == 6  # the small rebuild only
    finally:
        con.close()


def test_scaling_keeps_prices_and_replica_widths(fleet: Registry) -> None:
    scaled = scale_registry(fleet, 8)
    for before, after in zip(fleet.pools, scaled.pools, strict=True):
        assert after.devices == 8 and after.hourly_cost_per_device == before.hourly_cost_per_device
        assert after.nodes == 4  # two devices per node, so every story has several nodes to play on
        if after.serving and before.serving:
            assert after.serving.devices_per_replica == before.serving.devices_per_replica
            assert after.serving.replicas * after.serving.devices_per_replica <= 8
    lays = {lay.pool.id: lay for lay in layout(scaled)}
    assert lays["h100-a"].nodes == ("h100-a-01", "h100-a-02", "h100-a-03", "h100-a-04")
    assert lays["mlu370-a"].reporting_nodes == ("mlu370-a-01", "mlu370-a-02")
    assert [lay.takes_traffic for lay in lays.values()] == [True, True, True, True, False, True]
    one = dataclasses.replace(fleet, pools=fleet.pools[:1])
    assert scale_registry(one, 1).pools[0].nodes == 1


def test_the_demo_fleet_file_loads_with_its_evidence_beside_it(demo_db: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # the file `hetpool demo` writes names its evidence relative to itself, in a folder beside it, so
    # `hetpool registry load` reads it under the file's own folder as it reads any registry's evidence
    fleet = demo_db.with_name(f"{demo_db.stem}.fleet.yaml")
    text = fleet.read_text(encoding="utf-8")
    assert f"file: {demo_db.stem}.evidence/mlu370-a/operators.csv" in text
    assert "file: /" not in text and "baseline: /" not in text
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(demo_db.read_bytes())
    capsys.readouterr()
    assert main(["--db", str(copy), "registry", "load", str(fleet)]) == 0, capsys.readouterr().err
    # the registry the demo stored is the one its own fleet file gives: loading it is no new snapshot
    assert "unchanged since snapshot #1" in capsys.readouterr().out
