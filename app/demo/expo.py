"""Exposition text for many scrapes at once: one block per metric family, every sample with its timestamp.

A family is a (time x series) value matrix; NaN means the series had no sample at that scrape. Rendering is
vectorized with Polars string kernels so that millions of lines cost seconds, not minutes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl


def labels_text(pairs: Iterable[tuple[str, str]]) -> str:
    """`{k="v",...}` in the order given (exporters differ: client_golang sorts, DCGM's template does not)."""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + body + "}" if body else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass(frozen=True)
class Family:
    """One metric family: names of its series (sample name + labels text) and their values over time."""

    name: str
    help: str
    type: str                 # gauge, counter or histogram (as written in # TYPE)
    series: tuple[str, ...]   # full sample text before the value, for example 'gpu_health{gpu_id="0"}'
    values: np.ndarray        # shape (len(ts), len(series)); NaN = no sample
    decimals: int = 0         # digits after the point; 0 writes integers


def family(name: str, help_: str, type_: str, series: Mapping[str, np.ndarray], decimals: int = 0) -> Family:
    """A family from a mapping of series text to its value column."""
    keys = tuple(series)
    values = np.column_stack([series[k] for k in keys]) if keys else np.empty((0, 0))
    return Family(name, help_, type_, keys, values, decimals)


def render(families: Iterable[Family], ts_ms: np.ndarray) -> str:
    """The exposition text: # HELP and # TYPE once per family, then its samples scrape by scrape."""
    ts_text = pl.Series("ts", ts_ms, dtype=pl.Int64).cast(pl.String)
    out: list[str] = []
    for fam in families:
        if not fam.series:
            continue
        n_s = fam.values.shape[1]
        flat = fam.values.reshape(-1)
        keep = ~np.isnan(flat)
        if not keep.any():
            continue
        idx = np.flatnonzero(keep)
        value = pl.Series("v", flat[idx])
        value_text = (value.round(0).cast(pl.Int64).cast(pl.String) if fam.decimals == 0
                      else value.round(fam.decimals).cast(pl.String))
        body = pl.DataFrame({
            "s": pl.Series(fam.series, dtype=pl.String).gather(idx % n_s),
            "v": value_text,
            "t": ts_text.gather(idx // n_s),
        }).select(pl.concat_str(["s", "v", "t"], separator=" ").str.join("\n")).item()
        out.append(f"# HELP {fam.name} {fam.help}\n# TYPE {fam.name} {fam.type}\n{body}\n")
    return "".join(out)
