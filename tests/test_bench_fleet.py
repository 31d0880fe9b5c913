"""The fleet benchmark: its generated fleet loads, its file holds what theory says, and its table has every column."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_fleet
from pool_registry import load_registry


def test_pools_cover_the_devices_on_whole_nodes_and_the_fleet_file_is_a_valid_registry(tmp_path: Path) -> None:
    pools = bench_fleet.pools_for(600)
    assert [p.devices for p in pools] == [256, 256, 88]  # POOL_DEVICES each, the rest in the last
    assert [p.chip for p in pools] == ["h100-sxm", "mi300x", "ascend-910b"]
    path = tmp_path / "fleet.yaml"
    path.write_text(bench_fleet.fleet_yaml(pools), encoding="utf-8")
    reg = load_registry(path)
    assert [(p.id, p.devices, p.devices_per_node) for p in reg.pools] == [
        ("p000", 256, 8), ("p001", 256, 8), ("p002", 88, 8)]


@pytest.mark.parametrize("devices", [0, 12, -8])
def test_a_size_off_whole_nodes_is_refused(devices: int) -> None:
    with pytest.raises(SystemExit, match=f"multiple of 8 devices, got {devices}"):
        bench_fleet.pools_for(devices)


@pytest.mark.parametrize("text", ["", "1k", "8,,x"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(SystemExit, match="--sizes takes device counts"):
        list(bench_fleet.iter_sizes(text))


@pytest.mark.slow
def test_a_smoke_run_prints_every_column_and_keeps_its_files(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    bench_fleet.main(["--sizes", "16,8", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.strip().startswith("devices |"))
    assert [c.strip() for c in lines[head].split("|")] == list(bench_fleet.COLUMNS)
    small, small_ratio, big, big_ratio = (lines[head + k].split("|") for k in (2, 3, 4, 5))
    assert all(len(row) == len(bench_fleet.COLUMNS) for row in (small, small_ratio, big, big_ratio))
    # a device reports 11 series a minute (10 metrics and its error counter), a node 2 versions: a day of 8
    # devices (one node) is 1440 x (8 x 11 + 2) samples, sorted smallest first whatever the order given
    assert [int(small[0].replace(",", "")), int(small[1].replace(",", ""))] == [8, 1440 * (8 * 11 + 2)]
    assert [int(big[0].replace(",", "")), int(big[1].replace(",", ""))] == [16, 1440 * (16 * 11 + 2 * 2)]
    assert all(c.strip() == "1.00x" for c in small_ratio)
    assert small_ratio[0].strip() == "1.00x" and big_ratio[0].strip() == "2.00x"
    assert "Fleet health at 16 devices" in out and ("target met" in out or "TARGET MISSED" in out)
    for size in (8, 16):  # --keep keeps the fleet, the day's file and the database
        assert {p.name for p in (tmp_path / f"fleet-{size}").iterdir()} >= {"fleet.yaml", "day.prom",
                                                                            "hetpool.duckdb"}
