"""Version matrix, model x pool compatibility, metric coverage by exporter version, and `hetpool versions`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

from app.cli import main
from pool_registry import Registry, RegistryError, load_registry_text
from pool_registry.compat import FRAMEWORK_INCOMPATIBLE, PASS
from pool_registry.components import group_of
from replay.planner.compat import check
from store import Held, IngestRun, commit_run, connect, require_registry, save_registry
from store.views.coverage import exporter_coverage, vanished_metrics
from store.views.versions import version_matrix
from store.views.window import Window
from tests.conftest import FLEET

HOUR = 3_600_000
END = int(dt.datetime(2026, 11, 29, 8, tzinfo=dt.UTC).timestamp() * 1000)
START = END - 24 * HOUR  # the small demo's day; its drifted drivers appear 40 % in, at 9.6 h


def drifted(db: Path, start: int, end: int) -> dict[tuple[str, str], list[tuple[str, str]]]:
    con = connect(db, read_only=True)
    try:
        cells = version_matrix(con, require_registry(con), Window(start, end))
    finally:
        con.close()
    return {(c.pool, c.component): [(n.node, n.version) for n in c.nodes] for c in cells if c.drift}


def test_drift_on_the_demo_inside_the_window(demo_db: Path) -> None:
    assert drifted(demo_db, START + 10 * HOUR, END) == {
        ("mi300x-a", "driver"): [("mi300x-a-02", "6.12.12")],
        ("gaudi3-a", "driver"): [("gaudi3-a-01", "1.22.2")],
        ("ascend-a", "npu-exporter"): [("ascend-a-02", "v6.0.1")],  # upgraded 60 % in, at 14.4 h
    }


def test_the_demo_exporter_upgrade_drops_a_metric(demo_db: Path) -> None:
    con = connect(demo_db, read_only=True)
    try:
        gone = vanished_metrics(con, require_registry(con), Window(START, END))
    finally:
        con.close()
    assert gone.select("pool", "metric", "before", "after", "nodes").rows() == [
        ("ascend-a", "accelerator.power", "v6.0.0", "v6.0.1", ["ascend-a-02"])]  # error events never count


def test_no_drift_on_the_demo_before_the_drivers_changed(demo_db: Path) -> None:
    assert drifted(demo_db, START, START + 9 * HOUR) == {}


def test_a_window_holding_the_change_counts_each_node_once_at_its_newest_version(demo_db: Path) -> None:
    con = connect(demo_db, read_only=True)
    cells = {(c.pool, c.component): c for c in version_matrix(con, require_registry(con), Window(START, END))}
    con.close()
    cell = cells["mi300x-a", "driver"]
    assert cell.declared == "6.10.5"
    # a pool of two nodes: mi300x-a-02 ran 6.10.5, then 6.12.12; the counts add up to the two nodes
    assert cell.observed == (("6.10.5", 1), ("6.12.12", 1)) and cell.changed == 1
    assert cell.reason == "2 versions in the pool"  # both versions ran in the window
    assert cell.text() == ("driver: declared 6.10.5; seen 6.10.5 (1 node), 6.12.12 (1 node); 1 node changed "
                           "version in the window")
    assert not cells["h100-a", "driver"].drift and cells["h100-a", "driver"].observed == (("550.144.03", 2),)
    assert cells["h100-a", "cuda"].observed == () and not cells["h100-a", "cuda"].drift


def test_component_names_map_to_matrix_columns() -> None:
    assert [group_of(c) for c in ("driver", "nvml", "vbios", "firmware_fit", "cann", "cntoolkit", "hccl", "torch",
                                  "vllm", "vllm-gaudi", "dcgm-exporter", "mystery")] == [
        "driver", "driver", "firmware", "firmware", "runtime", "runtime", "communication", "framework",
        "serving", "serving", "exporter", "other"]


def with_stack(reg: Registry, pool: str, **stack: str) -> Registry:
    p = reg.pool(pool)
    return dataclasses.replace(reg, pools=tuple(dataclasses.replace(q, stack={**q.stack, **stack}) if q is p else q
                                                for q in reg.pools))


def test_vllm_015_required_against_016_installed(fleet: Registry) -> None:
    model = fleet.model("llama-3.1-70b")
    assert check(fleet, fleet.pool("gaudi3-a"), model).status == PASS
    reg = with_stack(fleet, "gaudi3-a", vllm="0.16.0")
    got = check(reg, reg.pool("gaudi3-a"), model)
    assert got.status == FRAMEWORK_INCOMPATIBLE and got.serves
    assert got.reasons == ("requires vllm >=0.15,<0.16; the pool has 0.16.0",)


def test_a_pool_without_the_required_engine_is_framework_incompatible(fleet: Registry) -> None:
    got = check(fleet, fleet.pool("h100-a"), fleet.model("qwen3-235b-a22b"))
    assert got.status == FRAMEWORK_INCOMPATIBLE and not got.serves
    assert "requires sglang >=0.5,<0.6; the pool's stack has no sglang (it runs vllm 0.15.1)" in got.requirement


def test_the_registry_refuses_an_unknown_dtype() -> None:
    text = FLEET.read_text().replace("    dtype: bf16\n", "    dtype: bf17\n", 1)
    with pytest.raises(RegistryError, match=r"models\[0\]\.dtype: unknown value 'bf17'"):
        load_registry_text(text, "fleet.yaml")


T0 = END - 4 * HOUR  # an exporter upgrade on h100-a-01 at T0 + 2 h that drops accelerator.energy


def plant_upgrade(db: Path, fleet: Registry) -> None:
    con = connect(db)
    save_registry(con, fleet, str(FLEET))
    ts = list(range(T0, T0 + 4 * HOUR, 60_000))
    after = T0 + 2 * HOUR
    samples = [(t, "h100-a", "h100-a-01", "0", "accelerator.utilization", 0.5) for t in ts]
    samples += [(t, "h100-a", "h100-a-01", "0", "accelerator.energy", float(t - T0)) for t in ts if t < after]
    run = IngestRun("file", "planted upgrade")
    run.add_read(len(samples))
    run.add_samples(pl.DataFrame(samples, orient="row", schema=["ts", "pool", "node", "device", "metric", "value"])
                    .with_columns(pl.lit("{}").alias("attributes")))
    run.add_versions(pl.DataFrame([("h100-a", "h100-a-01", "", "dcgm-exporter", "4.1.0" if t < after else "4.2.0", t)
                                   for t in ts], orient="row",
                                  schema=["pool", "node", "device", "component", "version", "ts"]))
    commit_run(Held(con), run)
    con.close()


def test_a_metric_that_vanishes_after_an_exporter_upgrade_is_flagged(db_path: Path, fleet: Registry) -> None:
    plant_upgrade(db_path, fleet)
    con = connect(db_path, read_only=True)
    w = Window(END - 24 * HOUR, END)
    cov = exporter_coverage(con, fleet, w)
    gone = vanished_metrics(con, fleet, w)
    before = vanished_metrics(con, fleet, Window(END - 24 * HOUR, T0 + 2 * HOUR))
    con.close()
    assert cov.select("pool", "exporter", "nodes", "metrics").rows() == [
        ("h100-a", "4.1.0", 1, ["accelerator.energy", "accelerator.utilization"]),
        ("h100-a", "4.2.0", 1, ["accelerator.utilization"])]
    assert gone.select("pool", "metric", "before", "after", "nodes", "upgraded_at").rows() == [
        ("h100-a", "accelerator.energy", "4.1.0", "4.2.0", ["h100-a-01"], T0 + 2 * HOUR)]
    assert before.is_empty()


def test_versions_command_flags_the_vanished_metric(db_path: Path, fleet: Registry,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    plant_upgrade(db_path, fleet)
    assert main(["--db", str(db_path), "versions"]) == 1
    out = capsys.readouterr().out
    assert "VANISHED h100-a: accelerator.energy after exporter 4.1.0 -> 4.2.0 on h100-a-01" in out
    assert ("dcgm-exporter: 4.2.0 (1 node); 1 node changed version in the window   DRIFT: 2 versions in the pool"
            in out)  # one node, counted once at its newest version


def test_versions_command_exits_1_on_the_demo(demo_db: Path, capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    csv = tmp_path / "compat.csv"
    assert main(["--db", str(demo_db), "versions", "--json", "--csv", str(csv)]) == 1
    got = json.loads(capsys.readouterr().out)
    assert not got["ok"] and got["drift"] == 3
    assert {(c["pool"], c["component"]) for c in got["matrix"] if c["drift"]} == {
        ("mi300x-a", "driver"), ("gaudi3-a", "driver"), ("ascend-a", "npu-exporter")}
    table = pl.read_csv(csv)
    assert table.columns == ["model", "pool", "status", "serves", "requirement"]
    assert table.height == len(got["compatibility"]) == 24  # 4 models x 6 pools
    # the demo's canary ships vllm 0.16 under a model pinned to 0.15: a served model it cannot serve
    served = table.filter(pl.col("serves")).select("model", "pool", "status", "requirement").rows()
    assert ("llama-3.1-70b", "gaudi3-a", "FRAMEWORK_INCOMPATIBLE",
            "requires vllm >=0.15,<0.16; the pool has 0.16.0") in served


def test_versions_command_exits_0_on_a_clean_fleet(fleet_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(fleet_db), "versions"]) == 0
    assert capsys.readouterr().out.strip().endswith(
        "ok: 0 drifted cell(s), 0 served model(s) incompatible, 0 vanished metric(s)")


def test_versions_command_usage_and_store_errors_exit_2(fleet_db: Path, db_path: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", str(fleet_db), "versions", "--pool", "nope"]) == 2
    assert main(["--db", str(fleet_db), "versions", "--csv", str(tmp_path / "no" / "such" / "x.csv")]) == 2
    empty = tmp_path / "empty.duckdb"
    connect(empty).close()
    assert main(["--db", str(empty), "versions"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("hetpool: error: unknown pool 'nope'")
    assert err[1].startswith("hetpool: error: cannot write")
    assert err[2] == "hetpool: error: no registry loaded; run 'hetpool registry load examples/fleet.yaml' first"
