"""fixed: every request is predicted to generate the same number of tokens (`tokens: N`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from yaml.nodes import Node

from pool_registry import Reader
from replay.predictors.base import Forecast, Problems, read_options, tokens_problem, tokens_reader


class Fixed:
    """One length for all."""

    name = "fixed"
    keys: tuple[str, ...] = ("tokens",)
    required: tuple[str, ...] = ("tokens",)
    causal = True

    def read(self, r: Reader, fields: dict[str, Node], path: str) -> dict[str, Any]:
        """tokens: a whole number."""
        return read_options(r, fields, path, {"tokens": tokens_reader})

    def check(self, options: dict[str, Any]) -> Problems:
        """tokens is required and >= 1."""
        if "tokens" not in options:
            return [("tokens", "missing required option (the predicted output length of every request)")]
        problem = tokens_problem(options["tokens"])
        return [("tokens", problem)] if problem else []

    def label(self, options: dict[str, Any]) -> str:
        """fixed (N tokens)."""
        return f"fixed ({options['tokens']} tokens)"

    def forecast(self, options: dict[str, Any], traffic: pl.DataFrame, history: pl.DataFrame | None) -> Forecast:
        """The same length for every request."""
        return Forecast(np.full(traffic.height, int(options["tokens"]), dtype=np.int64))


PREDICTOR = Fixed()
