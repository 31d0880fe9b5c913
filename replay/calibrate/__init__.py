"""Calibration: fit each pool's step-model coefficients by minimizing the model's error, and say which the data fix.

Evidence is observed requests (obs_pool, obs_ttft_s, obs_e2e_s, optional obs_replica) and benchmark tables
(replay.benchtable). For trial coefficients the pool's observed requests are replayed on it with their observed
routing (policy `observed`), and each benchmark row is run closed-loop on one replica (replay.bench); the
residuals are the differences of mean log TTFT and TPOT of requests grouped by prompt length (and arrival time),
and of every row's TTFT and TPOT. Pools of one chip and engine share one set of coefficients (mfu, mem_bw_eff,
mfu_decode, step and per-sequence overhead, latency per collective hop), fitted together over all their rows:
the step model carries the differences between their layouts (TP degree, pipeline stages, experts), so a fit on
some TP degrees predicts the others. replay.fitting does the bounded least squares in log space from several
starts and reports for each coefficient whether the evidence identifies it. Queueing and batching are in the
model, so busy periods need not be avoided. A long trace is sampled as a few contiguous stretches, each replayed
after a warm-up whose requests are not scored, so the fit's cost does not grow with the trace. MAPE and R^2 of
TTFT and TPOT at the fitted values say how well the model explains the evidence.

A pool with no evidence of its own whose chip has none either can take the coefficients of a fitted group of
the same engine (`carry`): mfu and mem_bw_eff are shares of the datasheet's peak FLOP/s and bandwidth, the
overheads are the engine's own time, and the collective latency is the link's. What the datasheet gets wrong
(a chip's sustained share of its peak differs between generations) the carried fit cannot know, so its error is
at least the sibling's fit error, reported beside it.

Modules: evidence (sampling and residuals), start (where a fit starts), fit (the fit of one chip and engine),
carry (to pools without evidence), notes (the English beside the numbers), record (PoolFit, FITTED and the
candidate file), run (the fleet's calibration).
"""

from replay.calibrate.carry import carried
from replay.calibrate.evidence import calibration_requests, kv_bound, sample_stretches
from replay.calibrate.fit import fit_group
from replay.calibrate.notes import sequence_time_as_work
from replay.calibrate.record import FITTED, BenchCheck, PoolFit, calibrated_candidate
from replay.calibrate.run import calibrate
from replay.calibrate.start import start_values, undeclared_hop

__all__ = ["FITTED", "BenchCheck", "PoolFit", "calibrate", "calibrated_candidate", "calibration_requests", "carried",
           "fit_group", "kv_bound", "sample_stretches", "sequence_time_as_work", "start_values", "undeclared_hop"]
