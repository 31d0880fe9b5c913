"""Cost: money per pool over the window, what of it was spent on idle devices, and the routing mix.

- paid device-hours = devices declared in the registry x hours of the window that hold data (the window
  clipped to the first and last sample in the store): a device is paid for whether it reports or not;
- busy device-hours = sum over device-hours of the mean utilization in that hour (from the 1-hour rollup);
- cost = paid device-hours x hourly cost per device; busy cost = busy device-hours x the same rate;
  idle cost = cost - busy cost (money spent on idle or silent devices);
- tokens = increase of serving.tokens.prompt + serving.tokens.generated in the window (both directions of
  work, as in replay summaries); cost per million tokens = cost / tokens x 1e6.
"""

from __future__ import annotations

import duckdb
import polars as pl

from canonical.metrics import GENERATED_TOKENS, PROMPT_TOKENS
from canonical.timeunits import HOUR_MS
from pool_registry import Registry
from store.views.counters import counter_increments
from store.views.health import UTIL, primary
from store.views.reliability import hour_window
from store.views.window import Window, data_span, frame, pool_filter

PROMPT, GENERATED = PROMPT_TOKENS, GENERATED_TOKENS


def paid_hours(con: duckdb.DuckDBPyConnection, w: Window) -> float:
    """Hours of the window that lie between the first and the last sample in the store."""
    span = data_span(con)
    if span is None:
        return 0.0
    lo = max(w.start_ms, span[0])
    hi = min(w.end_ms, span[1] - span[1] % HOUR_MS + HOUR_MS)
    return max(0, hi - lo) / HOUR_MS


def busy_device_hours(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per pool: sum over device-hours of mean utilization (pool, busy_hours)."""
    h = hour_window(w)
    pools, params = pool_filter(h)
    which, metrics = primary([UTIL])
    return frame(con, f"""
        SELECT pool, sum(u) AS busy_hours FROM (
            SELECT pool, sum(sum) / sum(count) AS u FROM rollup_1h
            WHERE {which} AND device <> '' AND bucket >= ? AND bucket < ?{pools}
            GROUP BY pool, node, device, bucket)
        GROUP BY pool ORDER BY pool""", [*metrics, h.start_ms, h.end_ms, *params])


def tokens(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per pool: prompt and generated tokens counted by the serving engines in the window."""
    out = []
    for metric, name in ((PROMPT, "prompt_tokens"), (GENERATED, "generated_tokens")):
        inc = counter_increments(con, w, metric)
        out.append(inc.group_by("pool").agg(pl.col("inc").sum().alias(name)))
    return out[0].join(out[1], on="pool", how="full", coalesce=True)


def cost_by_pool(con: duckdb.DuckDBPyConnection, registry: Registry, w: Window, pools: list[str]) -> pl.DataFrame:
    """One row per pool: devices, $/h, cost, busy and idle cost, idle share, tokens and $ per million tokens."""
    hours = paid_hours(con, hour_window(w))
    base = pl.DataFrame([{
        "pool": p.id, "devices": p.devices, "cost_per_hour": p.hourly_cost,
        "rate": p.hourly_cost_per_device, "paid_hours": p.devices * hours,
    } for p in registry.pools if p.id in pools], schema={
        "pool": pl.String, "devices": pl.Int64, "cost_per_hour": pl.Float64, "rate": pl.Float64,
        "paid_hours": pl.Float64})
    df = (base.join(busy_device_hours(con, w), on="pool", how="left")
          .join(tokens(con, w), on="pool", how="left")
          .with_columns(pl.col("busy_hours", "prompt_tokens", "generated_tokens").fill_null(0.0)))
    cost = pl.col("paid_hours") * pl.col("rate")
    busy = pl.min_horizontal(pl.col("busy_hours"), pl.col("paid_hours")) * pl.col("rate")
    all_tokens = pl.col("prompt_tokens") + pl.col("generated_tokens")
    return df.with_columns(cost.alias("cost"), busy.alias("busy_cost")).with_columns(
        (pl.col("cost") - pl.col("busy_cost")).alias("idle_cost"),
        pl.when(pl.col("cost") > 0).then(1 - pl.col("busy_cost") / pl.col("cost")).alias("idle_share"),
        all_tokens.alias("tokens"),
        pl.when(all_tokens > 0).then(pl.col("cost") / all_tokens * 1e6).alias("cost_per_mtok"),
    ).drop("rate")


def routing_mix(con: duckdb.DuckDBPyConnection, w: Window, step_ms: int) -> pl.DataFrame:
    """Requests per step bucket and serving pool, with each pool's share of the bucket: t, pool, requests, share."""
    pools, params = pool_filter(w, "obs_pool")
    return frame(con, f"""
        SELECT t, pool, n AS requests, n / sum(n) OVER (PARTITION BY t) AS share FROM (
            SELECT arrival_ms - arrival_ms % {int(step_ms)} AS t, coalesce(obs_pool, 'unrouted') AS pool,
                count(*) AS n
            FROM requests WHERE arrival_ms >= ? AND arrival_ms < ?{pools} GROUP BY ALL)
        ORDER BY t, pool""", [w.start_ms, w.end_ms, *params])
