"""table: a predicted output length per SLA tier, `tiers: {tier: tokens}`, and `default: N` for other tiers
(256 unless given)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
from yaml.nodes import Node

from pool_registry import Reader
from replay.predictors.base import Forecast, Problems, read_options, tokens_problem, tokens_reader

DEFAULT_TOKENS = 256


def _tiers_reader(r: Reader) -> Callable[[Node, str], Any]:
    def read(node: Node, path: str) -> dict[str, Any]:
        return {tier: r.integer(item, f"{path}.{tier}") for tier, item in r.free_mapping(node, path).items()}
    return read


class Table:
    """Tokens by SLA tier."""

    name = "table"
    keys: tuple[str, ...] = ("tiers", "default")
    required: tuple[str, ...] = ("tiers",)
    causal = True

    def read(self, r: Reader, fields: dict[str, Node], path: str) -> dict[str, Any]:
        """tiers: a mapping of tier to whole tokens; default: whole tokens."""
        return read_options(r, fields, path, {"tiers": _tiers_reader, "default": tokens_reader})

    def check(self, options: dict[str, Any]) -> Problems:
        """A non-empty tier mapping of counts >= 1, and a default >= 1 when given."""
        tiers = options.get("tiers")
        if not isinstance(tiers, dict) or not tiers:
            return [("tiers", f"expected a non-empty mapping of SLA tier to tokens, got {tiers!r}")]
        out = [(f"tiers.{tier}", p) for tier, value in tiers.items() if (p := tokens_problem(value))]
        if "default" in options and (p := tokens_problem(options["default"])):
            out.append(("default", p))
        return out

    def label(self, options: dict[str, Any]) -> str:
        """table (tier N, ..., else N tokens)."""
        tiers = ", ".join(f"{t} {v}" for t, v in sorted(options["tiers"].items()))
        return f"table ({tiers}, else {options.get('default', DEFAULT_TOKENS)} tokens)"

    def forecast(self, options: dict[str, Any], traffic: pl.DataFrame, history: pl.DataFrame | None) -> Forecast:
        """Each request's tier looked up."""
        tiers = {str(k): int(v) for k, v in options["tiers"].items()}
        default = int(options.get("default", DEFAULT_TOKENS))
        pred = traffic.select(pl.col("sla_tier").replace_strict(tiers, default=default, return_dtype=pl.Int64)
                              ).to_series().to_numpy()
        return Forecast(pred)


PREDICTOR = Table()
