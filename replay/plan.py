"""Everything a replay can compute before its event loop, vectorized over (pool, request).

`orders` holds each distinct cost ranking of the statically feasible pools (cheapest first, by
costmodel.full_batch_cost) and `code[i]` says which one request i has, so no per-request tuple is built.
Static feasibility is what a gateway can judge (replay/constraints.py): the pool serves the request's model (with a
vision encoder, when the request carries images, whose tokens join its prompt: replay/encode.py), and its prompt
plus the client's max_tokens (else one output token) is within the model's window and fits one replica's KV cache
next to the weights.

Ranking uses the predicted output length (`pred_out`, from the candidate's predictor), as a router would: pools
whose window and KV cache hold the prompt plus the predicted output come first, cheapest first, then the others
by cost (an output that outgrows its pool's window stops there). The prediction never makes a pool infeasible;
the true length (`out_tokens`) is only for the simulation. A predictor that learns during the run updates the
predictions of a block of arrivals at a time (`refresh`), and the block's rankings with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl

from replay import constraints, costmodel, encode, predictors
from replay.candidate import Candidate
from replay.exceptions import ReplayError
from replay.fleet import PoolSpec
from replay.predictors import Forecast

INF = float("inf")


@dataclass
class Plan:
    """Per-request inputs of one run, the static feasibility of each pool and the pools' cost rankings."""

    pools: tuple[PoolSpec, ...]
    t0_ms: int
    arrival: np.ndarray          # seconds since the first arrival, non-decreasing
    in_tokens: np.ndarray
    out_tokens: np.ndarray       # the true output lengths: what the simulation generates
    cached_tokens: np.ndarray
    max_tokens: np.ndarray       # what the client asked for at most, 0 when it sent none
    models: np.ndarray
    ttft_limit: np.ndarray       # per request, inf when the tier sets none
    e2e_limit: np.ndarray
    rank_cost: np.ndarray        # (pools, requests) cost at full batches, for ranking
    feasible: np.ndarray         # (pools, requests) static constraints (model, context, KV capacity)
    obs_pool: np.ndarray         # pool index that served it in the trace, -1 when unknown
    obs_replica: np.ndarray      # replica index within that pool, -1 when unknown
    orders: list[tuple[int, ...]] = field(default_factory=list)
    code: list[int] = field(default_factory=list)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    forecast: Forecast | None = None   # the predicted output lengths; pred_out is its array
    serves: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))  # (pools, requests)
    predictor: str = "oracle"          # the predictor's label
    predictor_note: str = predictors.ORACLE_NOTE  # what reports must say about it ("" unless the oracle)
    order_index: dict[tuple[int, ...], int] = field(default_factory=dict)
    pred_list: list[int] = field(default_factory=list)  # pred_out as Python ints, for the loop
    # each request's prefix blocks (empty without) and their size in tokens (0 without): a request with blocks has
    # its reuse replayed by the replica its prefill runs on, and its cached_tokens here is 0
    blocks: list[list[int]] = field(default_factory=list)
    block_tokens: list[int] = field(default_factory=list)
    # per request, the images it carries (a count, 0 when the trace gives only their tokens), the prompt tokens they
    # became (in in_tokens already) and the patches its replica's encoder computes; empty for a text-only trace
    images: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    image_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    patches: list[int] = field(default_factory=list)

    @property
    def pred_out(self) -> np.ndarray:
        """Predicted output tokens of each request: what routing reads."""
        return self.forecast.pred if self.forecast is not None else self.out_tokens.astype(np.int64)

    @cached_property
    def prices(self) -> costmodel.FullBatch:
        """The pools' full-batch cost coefficients, for ranking block after block."""
        return costmodel.FullBatch(self.pools)

    @cached_property
    def encoder_cost(self) -> np.ndarray:
        """Per pool, the money of one image patch in its replicas' vision encoder (0 without one)."""
        return np.array([encode.seconds_per_patch(costmodel.step_model(p), p.model) * p.replica_cost_per_s
                         for p in self.pools])

    @cached_property
    def limit(self) -> list[int]:
        """Per pool, the most context one request can hold: the model's window and one replica's KV cache."""
        return [int(min(p.model.max_context, p.kv_capacity_tokens)) for p in self.pools]

    @cached_property
    def overlong(self) -> set[int]:
        """Requests whose true context exceeds some pool's limit: the engine stops their output there."""
        least = min(self.limit) if self.pools else 0
        return set(np.flatnonzero(self.in_tokens + self.out_tokens > least).tolist())

    def refresh(self, i: int) -> int:
        """At the arrival of request i: the predictor's predictions for the next block, and the block's rankings
        (build_plan ranked only the first); returns the index of the block after it."""
        assert self.forecast is not None
        end, _ = self.forecast.refresh(i)
        self.rank(i, end)
        return end

    def rank(self, lo: int, hi: int) -> None:
        """Cost, feasibility and cost order of requests lo..hi-1 from their predicted output lengths."""
        pred = self.pred_out[lo:hi]
        cost, feasible, key = _rank(self.in_tokens[lo:hi], self.cached_tokens[lo:hi], pred.astype(np.float64),
                                    self.max_tokens[lo:hi], self.serves[:, lo:hi], self.pools, self.prices)
        if self.patches:  # the encoder's busy time on each pool's replica, priced as the prefill's is
            extra = self.encoder_cost[:, None] * np.asarray(self.patches[lo:hi], dtype=np.float64)[None, :]
            cost, key = cost + extra, key + extra
        self.rank_cost[:, lo:hi] = cost
        self.feasible[:, lo:hi] = feasible
        orders, code = _order_codes(key, feasible)
        index = self.order_index
        known = []
        for order in orders:
            if order not in index:
                index[order] = len(self.orders)
                self.orders.append(order)
            known.append(index[order])
        self.code[lo:hi] = np.asarray(known, dtype=np.int64)[code].tolist()
        self.pred_list[lo:hi] = pred.tolist()
        if "feasible_rows" in self.__dict__:  # only when a router already reads it
            self.feasible_rows[lo:hi] = feasible.T.tolist()

    @property
    def n(self) -> int:
        """Number of requests."""
        return int(self.arrival.shape[0])

    @cached_property
    def arrival_list(self) -> list[float]:
        """Arrivals as Python floats for the loop."""
        return self.arrival.tolist()

    @cached_property
    def prompt_list(self) -> list[int]:
        """Uncached prompt tokens of each request."""
        return (self.in_tokens - self.cached_tokens).astype(np.int64).tolist()

    @cached_property
    def in_list(self) -> list[int]:
        """Prompt tokens of each request."""
        return self.in_tokens.astype(np.int64).tolist()

    @cached_property
    def out_list(self) -> list[int]:
        """Output tokens of each request."""
        return self.out_tokens.astype(np.int64).tolist()

    @cached_property
    def ttft_list(self) -> list[float]:
        """TTFT limits as Python floats."""
        return self.ttft_limit.tolist()

    @cached_property
    def e2e_list(self) -> list[float]:
        """e2e limits as Python floats."""
        return self.e2e_limit.tolist()

    @cached_property
    def feasible_rows(self) -> list[list[bool]]:
        """feasible[i][p] as Python bools."""
        return self.feasible.T.tolist()


def tier_limits(traffic: pl.DataFrame, candidate: Candidate) -> tuple[np.ndarray, np.ndarray]:
    """Per-request TTFT and e2e limits; a tier the candidate does not define is an error."""
    n = traffic.height
    if not candidate.sla_tiers:
        return np.full(n, INF), np.full(n, INF)
    used = sorted(traffic["sla_tier"].unique().to_list())
    missing = [t for t in used if t not in candidate.sla_tiers]
    if missing:
        raise ReplayError(
            f"traffic uses SLA tier {', '.join(repr(t) for t in missing)} that candidate '{candidate.name}' "
            f"does not define; defined: {', '.join(sorted(candidate.sla_tiers))}")

    def limit(attr: str) -> np.ndarray:
        mapping = {name: INF if getattr(t, attr) is None else getattr(t, attr)
                   for name, t in candidate.sla_tiers.items()}
        return traffic.select(pl.col("sla_tier").replace_strict(mapping, return_dtype=pl.Float64)).to_series(
        ).to_numpy()

    return limit("ttft_s"), limit("e2e_s")


def _cost_orders(cost: np.ndarray, feasible: np.ndarray) -> tuple[list[tuple[int, ...]], list[int]]:
    orders, code = _order_codes(cost, feasible)
    return orders, code.tolist()


def _order_codes(cost: np.ndarray, feasible: np.ndarray) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The distinct cost orders of the feasible pools (cheapest first) and each request's index among them."""
    npools, n = cost.shape
    if n == 0:
        return [], np.zeros(0, dtype=np.int64)
    # Rank along contiguous rows of the (requests, pools) layout: sorting along the strided axis is 15x slower.
    masked = np.ascontiguousarray(np.where(feasible, cost, INF).T)
    ranked = np.argsort(masked, axis=1, kind="stable")
    count = feasible.sum(axis=0)
    ranked = np.where(np.arange(npools)[None, :] < count[:, None], ranked, npools)  # pad infeasible
    if (npools + 1) ** npools < 2**62:
        keys = ranked.astype(np.int64) @ ((npools + 1) ** np.arange(npools, dtype=np.int64))
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(ranked, axis=0, return_index=True, return_inverse=True)
    orders = [tuple(int(p) for p in ranked[j] if p < npools) for j in first.tolist()]
    return orders, inverse.reshape(-1)


def _serves(traffic: pl.DataFrame, pools: tuple[PoolSpec, ...]) -> np.ndarray:
    """(pools, requests): the request names the pool's model or none, and carries no images unless the model has
    a vision encoder."""
    model = pl.col("model")
    serves = traffic.select(((model == "") | (model == p.model.id)).alias(str(k)) for k, p in enumerate(pools)
                            ).to_numpy().T
    carries = encode.carries_images(traffic)
    if carries.any():
        text_only = np.array([p.model.vision is None for p in pools], dtype=bool)
        serves = serves & ~(text_only[:, None] & carries[None, :])
    return serves


def _observed(traffic: pl.DataFrame, pools: tuple[PoolSpec, ...]) -> tuple[np.ndarray, np.ndarray]:
    n = traffic.height
    if "obs_pool" not in traffic.columns:
        return np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    index = {p.id: k for k, p in enumerate(pools)}
    pool = traffic.select(pl.col("obs_pool").replace_strict(index, default=-1, return_dtype=pl.Int64)
                          ).to_series().to_numpy()
    replica = (traffic["obs_replica"].fill_null(-1).to_numpy().astype(np.int64) if "obs_replica" in traffic.columns
               else np.full(n, -1, dtype=np.int64))
    limit = np.array([p.replicas for p in pools] + [0])[pool]
    return pool, np.where((replica >= 0) & (replica < limit), replica, -1)


def _rank(in_t: np.ndarray, cached: np.ndarray, out_t: np.ndarray, max_tokens: np.ndarray, serves: np.ndarray,
          pools: tuple[PoolSpec, ...], prices: costmodel.FullBatch | None = None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pools, requests) cost at full batches for these (predicted) output lengths, static feasibility from what the
    client sent, and the ranking key: the cost, behind every pool the predicted context fits when it does not."""
    cost = (prices or costmodel.FullBatch(pools)).costs(in_t, cached, out_t)
    need = constraints.needed_context(in_t, max_tokens)
    feasible = np.vstack([serves[k] & constraints.fits_context(need, p) & constraints.fits_memory(need, p)
                          for k, p in enumerate(pools)])
    predicted = in_t + out_t
    fits = np.vstack([constraints.fits_context(predicted, p) & constraints.fits_memory(predicted, p) for p in pools])
    if fits.all() or not cost.size:
        return cost, feasible, cost
    behind = 2.0 * float(np.abs(cost).max()) + 1.0  # more than any cost apart, so a fitting pool ranks first
    return cost, feasible, np.where(fits, cost, cost + behind)


def prefix_blocks(traffic: pl.DataFrame) -> tuple[list[list[int]], list[int]]:
    """Each request's prefix blocks and block size, or two empty lists when no request has blocks."""
    if "hash_ids" not in traffic.columns or "block_tokens" not in traffic.columns:
        return [], []
    has = pl.col("hash_ids").is_not_null() & (pl.col("block_tokens").fill_null(0) > 0)
    out = traffic.select(
        pl.when(has).then(pl.col("hash_ids")).otherwise(pl.lit([], pl.List(pl.Int64))).alias("ids"),
        pl.when(has).then(pl.col("block_tokens")).otherwise(0).cast(pl.Int64).alias("size"))
    sizes = out["size"]
    if not (sizes > 0).any():
        return [], []
    return out["ids"].to_list(), sizes.to_list()


def build_plan(traffic: pl.DataFrame, pools: tuple[PoolSpec, ...], candidate: Candidate,
               rng: np.random.Generator, history: pl.DataFrame | None = None) -> Plan:
    """Vectorized feasibility, limits and cost rankings for traffic sorted by arrival, from the output lengths
    the candidate's predictor expects (history: requests that completed before this traffic, for it to learn
    from)."""
    arrival_ms = traffic["arrival_ms"].to_numpy().astype(np.int64)
    t0 = int(arrival_ms[0]) if arrival_ms.size else 0
    in_t = traffic["in_tokens"].to_numpy().astype(np.float64)
    out_t = traffic["out_tokens"].to_numpy().astype(np.float64)
    image_tokens, patches = encode.image_load(traffic, {p.model.id: p.model for p in pools})
    images = np.zeros(0, dtype=np.int64)
    if encode.carries_images(traffic).any():  # the images' tokens join the prompt: its prefill and its KV
        in_t = in_t + image_tokens
        images = (traffic["images"].fill_null(0).to_numpy().astype(np.int64) if "images" in traffic.columns
                  else np.zeros(traffic.height, dtype=np.int64))
    else:
        image_tokens = np.zeros(0, dtype=np.int64)
    blocks, block_tokens = prefix_blocks(traffic)
    cached = traffic["cached_tokens"].to_numpy().astype(np.float64)
    if blocks:  # a request with blocks reuses what its replica's cache holds, not what the trace recorded
        cached = np.where(np.array(block_tokens) > 0, 0.0, cached)
    max_tokens = (traffic["max_tokens"].fill_null(0).to_numpy().astype(np.float64) if "max_tokens" in traffic.columns
                  else np.zeros(traffic.height))
    models = traffic["model"].to_numpy()
    ttft_lim, e2e_lim = tier_limits(traffic, candidate)
    forecast = predictors.forecast(candidate.predictor, traffic, history)
    n = traffic.height
    obs_pool, obs_replica = _observed(traffic, pools)
    plan = Plan(pools=pools, t0_ms=t0, arrival=(arrival_ms - t0) / 1000.0, in_tokens=in_t, out_tokens=out_t,
                cached_tokens=cached, max_tokens=max_tokens, models=models, ttft_limit=ttft_lim, e2e_limit=e2e_lim,
                rank_cost=np.zeros((len(pools), n)), feasible=np.zeros((len(pools), n), dtype=bool),
                obs_pool=obs_pool, obs_replica=obs_replica, code=[0] * n, rng=rng, forecast=forecast,
                serves=_serves(traffic, pools), predictor=predictors.label(candidate.predictor),
                predictor_note=predictors.note(candidate.predictor), pred_list=forecast.pred.tolist(),
                blocks=blocks, block_tokens=block_tokens, images=images, image_tokens=image_tokens,
                patches=patches.tolist() if image_tokens.size else [])
    # A predictor that learns predicts each later block anew when the run reaches it (refresh), which ranks it.
    plan.rank(0, forecast.next_block)
    return plan
