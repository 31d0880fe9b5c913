"""What an output-length predictor is: how many tokens a router expects a request to generate.

A gateway sees a request's arrival time, its prompt (in_tokens, cached_tokens), its SLA tier and model, and
what already happened: never how many tokens the request will generate. Routers rank pools, check the KV fit
and predict TTFT, e2e and queue drain from a predicted output length instead; the true one only decides when
a sequence really finishes.

A predictor binds to one run as a Forecast holding `pred[i]`, request i's predicted output length in whole
tokens (at least 1; only the oracle, which gives the true length, can say 0). A static predictor knows every
prediction before the run. A learning one also keeps `completed`, to which the simulator appends each request
as it completes (in time order), and `next_block`: when request `next_block` arrives, the simulator calls
`refresh(i)`, which predicts the next block of arrivals from what completed by then (so never from the
future) and says where the block after it starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import polars as pl
from yaml.nodes import Node

from pool_registry import Reader

Problems = list[tuple[str, str]]  # (option key, what is wrong with it)


class Forecast:
    """The predicted output lengths of one run's requests, in arrival order."""

    def __init__(self, pred: np.ndarray) -> None:
        self.pred = np.asarray(pred, dtype=np.int64)
        self.n = int(self.pred.shape[0])
        self.next_block = self.n
        self.completed: list[int] | None = None  # None: the predictor does not learn from completions

    def refresh(self, i: int) -> tuple[int, bool]:
        """Predict the arrivals from request i on from the completions so far: (where the next block starts,
        whether any prediction changed)."""
        return self.n, False


class Predictor(Protocol):
    """One kind of predictor: its candidate-file options, their checks, a label, and a forecast per run."""

    name: str
    keys: tuple[str, ...]      # the options a candidate file may give
    required: tuple[str, ...]  # of which these it must give
    causal: bool               # False only for the oracle, which reads the true length

    def read(self, r: Reader, fields: dict[str, Node], path: str) -> dict[str, Any]:
        """The options as typed values (type errors recorded on the reader, with their lines)."""
        ...

    def check(self, options: dict[str, Any]) -> Problems:
        """What is wrong with the options' values."""
        ...

    def label(self, options: dict[str, Any]) -> str:
        """How reports name this predictor with these options (two runs compare alike only with one label)."""
        ...

    def forecast(self, options: dict[str, Any], traffic: pl.DataFrame, history: pl.DataFrame | None) -> Forecast:
        """Bind to one run: traffic is the prepared frame in arrival order; history holds requests that completed
        before it (in_tokens, out_tokens, model, sla_tier) or is None."""
        ...


Read = Callable[[Reader], Callable[[Node, str], Any]]


def read_options(r: Reader, fields: dict[str, Node], path: str, readers: dict[str, Read]) -> dict[str, Any]:
    """Read each given option with its reader; an option that fails to read is left out (its problem is on r)."""
    out = {}
    for key, node in fields.items():
        before = len(r.problems)
        value = readers[key](r)(node, f"{path}.{key}" if path else key)
        if len(r.problems) == before:
            out[key] = value
    return out


def whole(value: Any) -> bool:
    """A whole number (not a bool, which Python counts as one)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def tokens_problem(value: Any) -> str | None:
    """Why a token count is unusable, or None."""
    if not whole(value):
        return f"expected a whole number of tokens, got {value!r}"
    if value < 1:
        return f"must be >= 1, got {value!r}"
    return None


def tokens_reader(r: Reader) -> Callable[[Node, str], Any]:
    """An integer as written (bounds are the predictor's check)."""
    return lambda n, p: r.integer(n, p)
