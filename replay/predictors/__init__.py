"""Output-length predictors: one module each, and a registry that names the known ones when asked for another.

    online   a quantile of completed requests' output lengths by model, tier and prompt length (the default)
    fixed    the same length for every request (tokens: N)
    table    a length per SLA tier (tiers: {tier: N}, default: N)
    oracle   the true length: an upper bound, not achievable by a router

A predictor written in plain Python anywhere joins the registry with `register` (see replay/policies for how the
command and the console load such a module).
"""

from __future__ import annotations

import polars as pl

from replay.candidate import PredictorSpec
from replay.exceptions import ReplayError, UnknownNameError
from replay.predictors import fixed, online, oracle, table
from replay.predictors.base import Forecast, Predictor
from replay.registry import add
from traces.base import DEFAULT_TIER

PREDICTORS: dict[str, Predictor] = {p.name: p for p in (online.PREDICTOR, fixed.PREDICTOR, table.PREDICTOR,
                                                         oracle.PREDICTOR)}
DEFAULT = "online"
ORACLE_NOTE = "oracle: an upper bound, not achievable by a router"
HISTORY_COLUMNS = ("in_tokens", "out_tokens", "model", "sla_tier")


def get_predictor(name: str) -> Predictor:
    """The predictor registered under name, or an error listing the known ones."""
    try:
        return PREDICTORS[name]
    except KeyError:
        raise UnknownNameError(f"unknown predictor '{name}'; known: {', '.join(PREDICTORS)}") from None


def register(predictor: Predictor) -> Predictor:
    """Add a predictor to the registry under its name and return it; a name taken by another one is an error."""
    return add(PREDICTORS, predictor, "predictor", ("keys", "required", "causal", "read", "check", "label",
                                                    "forecast"), "replay/predictors/base.py: Predictor")


def problems(spec: PredictorSpec) -> list[str]:
    """Everything wrong with a predictor spec built in code (the candidate loader reports the same per line)."""
    try:
        predictor = get_predictor(spec.name)
    except UnknownNameError as exc:
        return [str(exc)]
    unknown = [k for k in spec.options if k not in predictor.keys]
    out = [f"predictor '{spec.name}' has no option '{k}'; options: {', '.join(predictor.keys) or 'none'}"
           for k in unknown]
    known = {k: v for k, v in spec.options.items() if k in predictor.keys}
    return out + [f"predictor '{spec.name}': {key} {message}" for key, message in predictor.check(known)]


def label(spec: PredictorSpec) -> str:
    """How reports name the predictor (with its options when they differ from the defaults)."""
    return get_predictor(spec.name).label(spec.options)


def note(spec: PredictorSpec) -> str:
    """What a report must say about the predictor: the oracle's caveat, or nothing."""
    return "" if get_predictor(spec.name).causal else ORACLE_NOTE


def forecast(spec: PredictorSpec, traffic: pl.DataFrame, history: pl.DataFrame | None = None) -> Forecast:
    """Bind the predictor to one run of the prepared traffic, or raise ReplayError naming what is wrong."""
    wrong = problems(spec)
    if wrong:
        raise ReplayError("; ".join(wrong))
    return get_predictor(spec.name).forecast(spec.options, traffic, prepare_history(history))


def prepare_history(history: pl.DataFrame | None) -> pl.DataFrame | None:
    """A history frame with its four columns (model and sla_tier default as in traffic), rows lacking a length
    dropped; None when there is nothing in it."""
    if history is None or history.height == 0:
        return None
    missing = [c for c in ("in_tokens", "out_tokens") if c not in history.columns]
    if missing:
        raise ReplayError(f"history frame lacks column {', '.join(missing)}; has: {', '.join(history.columns)}")
    frame = history.select(
        pl.col("in_tokens").cast(pl.Int64), pl.col("out_tokens").cast(pl.Int64),
        (pl.col("model").cast(pl.String) if "model" in history.columns else pl.lit("")).fill_null("").alias("model"),
        (pl.col("sla_tier").cast(pl.String) if "sla_tier" in history.columns else pl.lit(DEFAULT_TIER)).fill_null(
            DEFAULT_TIER).alias("sla_tier"),
    ).drop_nulls(["in_tokens", "out_tokens"])
    return frame if frame.height else None


__all__ = ["DEFAULT", "HISTORY_COLUMNS", "ORACLE_NOTE", "PREDICTORS", "Forecast", "Predictor", "forecast",
           "get_predictor", "label", "note", "problems", "register"]
