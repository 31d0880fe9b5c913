"""oracle: the request's TRUE output length, which no router can know.

It is there to measure what perfect knowledge would add (`hetpool replay run --oracle-gap`): an upper bound, not
achievable by a router. It also reproduces the replay as it was before predictors, when routers read the true
lengths.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from yaml.nodes import Node

from pool_registry import Reader
from replay.predictors.base import Forecast, Problems


class Oracle:
    """The true output length."""

    name = "oracle"
    keys: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    causal = False

    def read(self, r: Reader, fields: dict[str, Node], path: str) -> dict[str, Any]:
        """No options."""
        return {}

    def check(self, options: dict[str, Any]) -> Problems:
        """No options."""
        return [(k, "the oracle takes no options") for k in options]

    def label(self, options: dict[str, Any]) -> str:
        """oracle."""
        return "oracle"

    def forecast(self, options: dict[str, Any], traffic: pl.DataFrame, history: pl.DataFrame | None) -> Forecast:
        """Every request's true out_tokens."""
        return Forecast(traffic["out_tokens"].to_numpy())


PREDICTOR = Oracle()
