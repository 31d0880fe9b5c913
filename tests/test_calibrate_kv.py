"""Which benchmark rows need more KV cache than a replica holds, counted by hand."""

from __future__ import annotations

import pytest

from replay import Candidate
from replay.calibrate import kv_bound
from replay.calibrate.notes import kv_note
from replay.fleet import PoolSpec, pools_by_id
from tests.test_calibrate import tp_fleet

# Llama-70B-like in BF16 on 80 GB chips at 90 % of memory: TP2 holds 2 x 80 x 0.9 = 144 GB, the weights take
# 140 GB, and a token's KV is 80 layers x 8 heads x 128 x 2 (K and V) x 2 bytes = 327,680 B: 4e9 / 327,680 =
# 12,207 tokens. TP4 has 288 - 140 = 148 GB free: 451,660 tokens.
CAPACITY = {"tp2": 12_207, "tp4": 451_660}


@pytest.fixture(scope="module")
def specs() -> dict[str, PoolSpec]:
    return pools_by_id(tp_fleet(concurrency=256), Candidate(name="x"))


def test_the_kv_capacity_of_a_replica_is_its_free_memory_over_a_tokens_kv(specs: dict[str, PoolSpec]) -> None:
    assert {p: specs[p].kv_capacity_tokens for p in CAPACITY} == CAPACITY


@pytest.mark.parametrize(("pool", "row", "bound"), [
    ("tp2", (256, 128, 31), False),     # 31 x 384 = 11,904 tokens fit 12,207
    ("tp2", (256, 128, 32), True),      # 32 x 384 = 12,288 do not
    ("tp2", (2048, 1024, 4), True),     # 12,288
    ("tp2", (2048, 1024, 3), False),    # 9,216
    ("tp4", (2048, 1024, 147), False),  # 451,584 fit 451,660
    ("tp4", (2048, 1024, 148), True),   # 454,656
])
def test_a_row_is_bound_when_its_clients_together_outgrow_the_cache(specs: dict[str, PoolSpec], pool: str,
                                                                    row: tuple[int, int, int], bound: bool) -> None:
    assert kv_bound(specs[pool], [row]) == ([row] if bound else [])


def test_clients_past_the_batch_limit_wait_in_the_queue_and_hold_no_cache(specs: dict[str, PoolSpec]) -> None:
    # max_concurrency 256: 1,000 clients hold the cache of 256, 256 x 48 = 12,288 > 12,207
    spec = specs["tp2"]
    assert spec.max_concurrency == 256
    assert kv_bound(spec, [(40, 8, 1000)]) == [(40, 8, 1000)]
    assert kv_bound(spec, [(40, 7, 1000)]) == []  # 256 x 47 = 12,032


def test_the_note_counts_the_rows_past_the_cache_and_names_the_first(specs: dict[str, PoolSpec]) -> None:
    rows = [(256, 128, 1), (256, 128, 64), (2048, 128, 16), (2048, 128, 1)]
    (note,) = kv_note(specs["tp2"], rows)
    assert note.startswith("2 of 4 benchmark rows of tp2 need more KV cache than a replica holds")
    assert "above 12207 tokens, first: ISL 256, OSL 128 at concurrency 64" in note
    assert kv_note(specs["tp4"], rows) == []
