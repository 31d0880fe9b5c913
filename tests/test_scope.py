"""Device-wide against component series, per shipped vendor: the profiles mark secondary engines, memories,
sensors and clock domains `scope: component`, and the pool tiles, series and hot-device list ignore them.

Each vendor's scrape has one device at 40 % utilization, half its memory used, a 60 °C die, a 1500 MHz compute
clock and a known power draw, and beside them secondary series whose values would move every one of those
numbers (engines at 90 %, a DDR pool nearly full, sensors at 95 °C, a memory clock at 900 MHz)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from collectors.files import read_chunks
from collectors.pipeline import IngestOptions, ingest_exposition
from normalizers.profile import COMPONENT
from normalizers.profile.sets import builtin_profiles
from store import Held, connect
from store.views import health
from store.views.window import Window

AT = 1_767_225_600_000  # 2026-01-01T00:00:00Z
WINDOW = Window(AT, AT + 60_000)
GIB, MIB = 1024**3, 1024**2

N = 'gpu="0",Hostname="n1"'
A = 'gpu_id="0",hostname="n1"'
H = 'id="0",hostname="n1"'
C = 'mlu="0",node="n1"'
SCRAPES = {  # vendor: (exposition, power in W)
    "dcgm": ("\n".join([
        f"DCGM_FI_DEV_GPU_UTIL{{{N}}} 40",
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{N}}} 0.9", f"DCGM_FI_PROF_DRAM_ACTIVE{{{N}}} 0.95",
        f"DCGM_FI_DEV_ENC_UTIL{{{N}}} 90", f"DCGM_FI_DEV_MEM_COPY_UTIL{{{N}}} 90",
        f"DCGM_FI_DEV_FB_USED{{{N}}} 40960", f"DCGM_FI_DEV_FB_FREE{{{N}}} 40000", f"DCGM_FI_DEV_FB_RESERVED{{{N}}} 960",
        f"DCGM_FI_DEV_POWER_USAGE{{{N}}} 500",
        f"DCGM_FI_DEV_GPU_TEMP{{{N}}} 60", f"DCGM_FI_DEV_MEMORY_TEMP{{{N}}} 95",
        f"DCGM_FI_DEV_SM_CLOCK{{{N}}} 1500", f"DCGM_FI_DEV_MEM_CLOCK{{{N}}} 900"]), 500.0),
    "amd": ("\n".join([
        f"gpu_gfx_activity{{{A}}} 40", f"gpu_umc_activity{{{A}}} 90",
        f"gpu_used_vram{{{A}}} 98304", f"gpu_total_vram{{{A}}} 196608",
        f"gpu_power_usage{{{A}}} 700", f"gpu_package_power{{{A}}} 950", f"gpu_average_package_power{{{A}}} 940",
        f"gpu_junction_temperature{{{A}}} 60", f"gpu_edge_temperature{{{A}}} 95",
        f"gpu_memory_temperature{{{A}}} 95", f'gpu_hbm_temperature{{{A},hbm_index="0"}} 95',
        f'gpu_clock{{{A},clock_type="system",clock_index="0"}} 1500',
        f'gpu_clock{{{A},clock_type="memory",clock_index="1"}} 900',
        f'gpu_clock{{{A},clock_type="soc",clock_index="2"}} 900']), 700.0),
    "ascend": ("\n".join([
        f"npu_chip_info_utilization{{{H}}} 40", f"npu_chip_info_overall_utilization{{{H}}} 90",
        f"npu_chip_info_vector_utilization{{{H}}} 90", f"npu_chip_info_cube_utilization{{{H}}} 90",
        f"npu_chip_info_hbm_used_memory{{{H}}} 32768", f"npu_chip_info_hbm_total_memory{{{H}}} 65536",
        f"npu_chip_info_used_memory{{{H}}} 15000", f"npu_chip_info_total_memory{{{H}}} 15360",
        f"npu_chip_info_power{{{H}}} 300",
        f"npu_chip_info_temperature{{{H}}} 60", f"npu_chip_info_hbm_temperature{{{H}}} 95",
        f"npu_chip_info_aicore_current_freq{{{H}}} 1500"]), 300.0),
    "gaudi": ("\n".join([
        f"habanalabs_utilization{{{H}}} 40",
        f"habanalabs_memory_used_bytes{{{H}}} {48 * GIB}", f"habanalabs_memory_total_bytes{{{H}}} {96 * GIB}",
        f"habanalabs_power_mW{{{H}}} 450000",
        f"habanalabs_temperature_onchip{{{H}}} 60", f"habanalabs_temperature_onboard{{{H}}} 95",
        f"habanalabs_clock_soc_mhz{{{H}}} 1500"]), 450.0),
    "cambricon": ("\n".join([
        f"mlu_utilization{{{C}}} 40",
        f"mlu_memory_used{{{C}}} {24 * GIB}", f"mlu_memory_total{{{C}}} {48 * GIB}",
        f"mlu_power_usage{{{C}}} 350",
        f"mlu_chip_temperature{{{C}}} 60", f"mlu_temperature{{{C}}} 95",
        f"mlu_frequency{{{C}}} 1500"]), 350.0),
}


def stored(tmp_path: Path, vendor: str, text: str) -> duckdb.DuckDBPyConnection:
    path = tmp_path / f"{vendor}.prom"
    path.write_text(text + "\n")
    con = connect(tmp_path / f"{vendor}.duckdb")
    report = ingest_exposition(Held(con), read_chunks(path), kind="file", source=str(path),
                               options=IngestOptions(pool="p", at_ms=AT, profile=vendor), clock=lambda: AT / 1000)
    c = report.counts
    assert c.rejected == 0 and c.read == c.stored, report
    return con


@pytest.mark.parametrize("vendor", sorted(SCRAPES))
def test_component_series_are_stored_but_do_not_move_the_tiles(tmp_path: Path, vendor: str) -> None:
    text, power_w = SCRAPES[vendor]
    con = stored(tmp_path, vendor, text)
    parts = con.execute("SELECT count(*) FROM samples WHERE NOT device_wide").fetchone()
    assert parts is not None and parts[0] >= 1  # kept for drill-down, only flagged
    tile = health.pool_tiles(con, WINDOW, ["p"]).row(0, named=True)
    assert tile["utilization"] == pytest.approx(0.40)
    assert tile["hbm_used"] == pytest.approx(0.5)
    assert tile["power_w"] == pytest.approx(power_w)
    assert tile["temp_max"] == pytest.approx(60.0)
    series = health.metric_series(con, WINDOW, 60_000)
    clock = series.filter(series["series"] == "clock (MHz)")["value"].to_list()
    assert clock == pytest.approx([1500.0])
    assert "hot" not in health.worst_devices(con, WINDOW, {}, 85.0)["issue"].to_list()
    con.close()


def test_every_profile_with_component_series_is_covered() -> None:
    marked = {p.name for p in builtin_profiles() if any(m.scope == COMPONENT for maps in p.metrics.values()
                                                        for m in maps)}
    assert marked == set(SCRAPES)
