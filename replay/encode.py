"""A vision-language model's encoder time: its compute on a request's image patches, at the rate the step model
prices a prompt token at.

The step model's s_per_token is 2 x active params FLOPs over the replica's sustained rate (peak x mfu x devices,
replay/costmodel.step_model); an image patch costs 2 x encoder params FLOPs at that same rate, so

    seconds per patch = s_per_token x pp x encoder params / active params

where pp counts that the encoder runs on the pipeline's first stage only (tp of the replica's devices). The
replica charges a request's patches x this to the pass that computes its first prompt chunk, before that pass's
own kernels (replay/replica/schedule.py); the encoder's attention over the patches is left out (Qwen2.5-VL's
windowed attention is a few per cent of its FLOPs at a 448 px image).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pool_registry import Model
from replay.step import StepModel


def seconds_per_patch(step: StepModel, model: Model) -> float:
    """Encoder seconds per image patch on a replica with this step model; 0 for a model without an encoder."""
    v = model.vision
    if v is None or model.active_params_b <= 0:
        return 0.0
    return step.s_per_token * step.pp * v.encoder_params_b / model.active_params_b


def carries_images(traffic: pl.DataFrame) -> np.ndarray:
    """Per request: True when it carries images (a count, or the tokens they become)."""
    out = np.zeros(traffic.height, dtype=bool)
    for col in ("images", "image_tokens"):
        if col in traffic.columns:
            out |= traffic[col].fill_null(0).to_numpy() > 0
    return out


def image_load(traffic: pl.DataFrame, models: dict[str, Model]) -> tuple[np.ndarray, np.ndarray]:
    """Per request (image tokens its prompt gains, patches its encoder computes), by the model it names (or, when it
    names none, the first of `models` with an encoder): image_tokens when the trace gives them, else images x the
    encoder's tokens per image; the patches in the encoder's ratio of patches to tokens. A model without an encoder
    cannot take the request at all (replay/plan.py): its tokens are the trace's image_tokens, its patches 0."""
    n = traffic.height
    tokens, patches = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    carries = carries_images(traffic)
    if not carries.any():
        return tokens, patches
    images = traffic["images"].fill_null(0).to_numpy() if "images" in traffic.columns else np.zeros(n, np.int64)
    given = (traffic["image_tokens"].fill_null(0).to_numpy() if "image_tokens" in traffic.columns
             else np.zeros(n, np.int64))
    named = traffic["model"].fill_null("").to_numpy() if "model" in traffic.columns else np.full(n, "")
    default = next((m for m in models.values() if m.vision is not None), None)
    tokens[:] = given  # a model without an encoder: what the trace says, for the reason it is refused
    for name in np.unique(named[carries]).tolist():
        model = models.get(name) if name else default
        if model is None or model.vision is None:
            continue
        v = model.vision
        here = carries & (named == name)
        tok = np.where(given[here] > 0, given[here], images[here] * v.tokens_per_image)
        tokens[here] = tok
        patches[here] = np.rint(tok * (v.patches_per_image / v.tokens_per_image)).astype(np.int64)
    return tokens, patches
