"""What a pool's step model assumes for want of registry fields, one sentence each, so that no term is dropped or
guessed without a word: `replay bench`, `replay run`, `plan` and `calibrate` print these beside their numbers.

- A model computes in its compute format (`compute_dtype`, else its weights'); a chip that declares no peak for
  it (`peak_tflops.fp8`, ...) computes at its bf16 peak, which hides the format's speed-up in mfu.
- Without `hidden_size` or `attention_heads` the collectives (tensor-parallel all-reduces, pipeline sends,
  expert all-to-alls) move activations of an estimated width (pool_registry.Model.estimated_hidden).
- Without `attention_heads` attention's compute over the context is off: heads x head dim need not equal the
  hidden width (Qwen3-235B-A22B: 64 x 128 = 8192 on a hidden of 4096), so no estimate is safe.
- A MoE model without `experts` and `experts_per_token` reads its inactive weights as experts each picked with
  probability active / total.
- A TP group on a link that declares no latency per hop (`interconnect.latency_us`, `cost_model.collective_us`)
  pays its all-reduces' bytes alone.
"""

from __future__ import annotations

from replay.fleet import PoolSpec


def assumptions(spec: PoolSpec, parallel: bool | None = None) -> tuple[str, ...]:
    """One sentence per assumption of the pool's step model; `parallel` (default: the pool's own layout has
    TP, PP or EP above 1) says whether collectives take part."""
    m, chip = spec.model, spec.chip
    wide = spec.tp > 1 or spec.pp > 1 or spec.ep > 1 if parallel is None else parallel
    out = []
    fmt = m.compute_format
    peak, fallback = chip.compute_peak(fmt)
    if fallback:
        out.append(f"{spec.id}: {m.id} computes in {fmt}, but {chip.id} declares no {fmt} peak "
                   f"(peak_tflops.{fmt}): compute runs at its bf16 peak, {peak:g} TFLOPS, so mfu holds the "
                   f"difference")
    if wide and m.hidden_estimated:
        out.append(f"{spec.id}: {m.id} declares no hidden_size or attention_heads: its collectives move activations "
                   f"of an estimated hidden size {m.hidden} (sqrt(active params / (12 x layers))); declare "
                   "hidden_size from its config.json")
    if not m.attention_heads:
        out.append(f"{spec.id}: {m.id} declares no attention_heads: attention's compute over the context is off "
                   "(prompts and long contexts come out fast); declare attention_heads from its config.json")
    if m.moe and not m.experts:
        out.append(f"{spec.id}: {m.id} declares no experts or experts_per_token: a batch's weight reads treat its "
                   f"inactive parameters as experts each picked with probability active / total "
                   f"({m.active_params_b:g}B / {m.total_params_b:g}B), under the pass's one roofline "
                   f"(the routed experts' own needs their counts)")
    if spec.tp > 1 and spec.collective_us is None and not chip.interconnect.latency_us:
        out.append(f"{spec.id}: {chip.id}'s interconnect declares no latency per hop (interconnect.latency_us): "
                   f"TP{spec.tp}'s all-reduces cost their bytes alone")
    return tuple(out)


def fleet_assumptions(specs: list[PoolSpec] | tuple[PoolSpec, ...], parallel: bool | None = None) -> tuple[str, ...]:
    """assumptions() of several pools, in order, each sentence once."""
    return tuple(dict.fromkeys(n for s in specs for n in assumptions(s, parallel)))
