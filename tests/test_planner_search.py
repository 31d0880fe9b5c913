"""plan_model's inputs: the model and pools by name, and settings that contradict each other, in one line."""

from __future__ import annotations

import pytest

from pool_registry import Registry
from replay.planner import PlanError, PlanSettings, Targets, plan_model


@pytest.mark.parametrize(("model", "pools", "settings", "message"), [
    ("nope", (), PlanSettings(), "unknown model 'nope'; known: llama-3.1-70b, qwen3-235b-a22b, qwen3-30b-a3b, "
                                 "qwen2.5-vl-7b"),
    ("llama-3.1-70b", ("h100-a", "x"), PlanSettings(),
     "unknown pool 'x'; known: h100-a, mi300x-a, ascend-a, gaudi3-a, mlu370-a"),
    ("llama-3.1-70b", (), PlanSettings(osl=0), "plan needs isl >= 0 and osl >= 1; got isl 1024, osl 0"),
    ("llama-3.1-70b", (), PlanSettings(concurrency=()), "plan needs concurrencies >= 1; got []"),
    ("llama-3.1-70b", (), PlanSettings(concurrency=(4, 0)), "plan needs concurrencies >= 1; got [4, 0]"),
    ("llama-3.1-70b", (), PlanSettings(context=1000), "context 1000 is shorter than a request's isl + osl = 1152"),
    ("qwen3-30b-a3b", (), PlanSettings(isl=40000), "context 40128 exceeds qwen3-30b-a3b's max_context of 32768"),
    ("llama-3.1-70b", (), PlanSettings(targets=Targets(tpot_ms=0)), "a TPOT target must be > 0 ms; got 0"),
    ("llama-3.1-70b", (), PlanSettings(targets=Targets(ttft_ms=float("nan"))), "a TTFT target must be > 0 ms; got nan"),
])
def test_bad_input_names_what_is_wrong(fleet: Registry, model: str, pools: tuple[str, ...], settings: PlanSettings,
                                       message: str) -> None:
    with pytest.raises(PlanError) as caught:
        plan_model(fleet, model, pools, settings)
    assert str(caught.value).startswith(message)


def test_the_context_sizes_the_kv_cache_not_the_request(fleet: Registry) -> None:
    short = plan_model(fleet, "llama-3.1-70b", ("h100-a",), PlanSettings(concurrency=(16,)))
    long = plan_model(fleet, "llama-3.1-70b", ("h100-a",), PlanSettings(context=65536, concurrency=(16,)))
    kv = {(p.layout.tp, p.layout.pp): p.memory.kv_gb for p in short.plans}
    for p in long.plans:
        assert p.memory.kv_gb == pytest.approx(kv[(p.layout.tp, p.layout.pp)] * 65536 / 1152)
    assert sum(p.fits for p in long.plans) < sum(p.fits for p in short.plans)
