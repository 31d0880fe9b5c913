"""A plan report's JSON, table and frames."""

from __future__ import annotations

import pytest

from pool_registry import Registry
from replay.planner import PLAN_KEYS, PlanSettings, memory_frame, plan_model, plans_frame, report_dict, report_lines


def test_json_frames_and_table_agree(fleet: Registry) -> None:
    report = plan_model(fleet, "llama-3.1-70b", ("ascend-a",), PlanSettings(concurrency=(16,)))
    data = report_dict(report)
    assert set(data) == {"model", "plans", "excluded", "min_devices", "compatibility", "notes"}
    assert all(tuple(p) == PLAN_KEYS for p in data["plans"])
    unfit = [p for p in data["plans"] if not p["fits"]]
    assert unfit and all(p["ttft_ms_p50"] is None and p["usd_per_mtok"] is None for p in unfit)
    frame = plans_frame(report)
    assert frame.height == len(data["plans"]) - len(unfit)
    assert frame["tpot_ms_p50"].to_list() == [p["tpot_ms_p50"] for p in data["plans"] if p["fits"]]
    best = report.plans[0]
    parts = memory_frame(best)
    assert parts["part"].to_list() == ["weights", "KV cache", "working memory", "free"]
    assert parts["gb"].sum() == pytest.approx(best.memory.usable_gb)
    lines = report_lines(report, top=2)
    assert lines[2].startswith(f"ascend-a     {best.layout.label:<14}")
    assert any(ln.startswith("  ascend-a tp1 pp32, tp2 pp32: layers:") for ln in lines)
    assert len(report_lines(report, top=0)) > len(lines)
