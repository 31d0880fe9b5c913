"""The demo's exposition writer: exact text for a small case, and a round trip through the project's parser."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.demo.dialects import device_dialect, engine_dialect
from app.demo.exceptions import DemoError
from app.demo.expo import family, labels_text, render
from normalizers import ExpositionParser


def test_render_writes_each_family_once_with_every_timestamped_sample() -> None:
    fam = family("gpu_health", "Health of the GPU", "gauge", {
        'gpu_health{gpu_id="0"}': np.array([1.0, 1.0, np.nan]),
        'gpu_health{gpu_id="1"}': np.array([1.0, 0.0, 1.0]),
    })
    power = family("power_W", "Power", "gauge", {"power_W": np.array([250.126, 251.0, 249.5])}, decimals=2)
    text = render([fam, power], np.array([1000, 31000, 61000]))
    assert text == (
        "# HELP gpu_health Health of the GPU\n# TYPE gpu_health gauge\n"
        'gpu_health{gpu_id="0"} 1 1000\ngpu_health{gpu_id="1"} 1 1000\n'
        'gpu_health{gpu_id="0"} 1 31000\ngpu_health{gpu_id="1"} 0 31000\n'
        'gpu_health{gpu_id="1"} 1 61000\n'  # NaN: the device was not scraped
        "# HELP power_W Power\n# TYPE power_W gauge\n"
        "power_W 250.13 1000\npower_W 251.0 31000\npower_W 249.5 61000\n")


def test_labels_keep_the_given_order_and_are_escaped() -> None:
    assert labels_text([("b", "1"), ("a", 'say "hi"\\')]) == '{b="1",a="say \\"hi\\"\\\\"}'
    assert labels_text([]) == ""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.floats(-1e12, 1e12, allow_nan=False)), min_size=3, max_size=3),
                min_size=1, max_size=20),
       st.sampled_from([0, 3]), st.sampled_from(['{host="n1"}', '{id="0",name="a b"}', ""]))
def test_what_is_written_parses_back_to_the_same_samples(rows: list[list[float | None]], decimals: int,
                                                         labels: str) -> None:
    values = np.array([[np.nan if v is None else v for v in row] for row in rows])
    series = {f"m_a{labels}": values[:, 0], f"m_b{labels}": values[:, 1], f"m_c{labels}": values[:, 2]}
    ts = 1_764_000_000_000 + np.arange(len(rows), dtype=np.int64) * 30_000
    text = render([family("m", "help", "gauge", series, decimals)], ts)
    parser = ExpositionParser()
    batches = [parser.feed(text.encode()), parser.finish()]
    got = sorted((b.series[str(k)][0], t, v) for b in batches
                 for k, v, t in b.samples.select("key", "value", "ts_ms").iter_rows())
    assert all(b.rejects.height == 0 for b in batches)
    want = sorted((name.split("{")[0], int(ts[i]), round(v, decimals)) for name, col in series.items()
                  for i, v in enumerate(col) if not math.isnan(v))
    assert [(n, t) for n, t, _ in got] == [(n, t) for n, t, _ in want]
    assert [v for _, _, v in got] == pytest.approx([v for _, _, v in want], rel=1e-12, abs=10.0 ** -decimals)


@pytest.mark.parametrize(("lookup", "name", "known"), [
    (device_dialect, "nvml", "amd, ascend, cambricon, dcgm, gaudi"),
    (engine_dialect, "tgi", "sglang, vllm"),
])
def test_unknown_dialects_name_the_known_ones(lookup: object, name: str, known: str) -> None:
    with pytest.raises(DemoError, match=f"'{name}'; known: {known}$"):
        lookup(name)  # type: ignore[operator]
