"""Capacity runway: the traffic's growth per week, and the date each pool first fails its SLA tolerance.

    growth = fit_growth(arrival_ms, in_tokens, out_tokens, end_ms=..., window_days=28)
    runway = compute_runway(candidate, recent_week, registry, growths, limit=0.01, horizon_weeks=26)
"""

from replay.runway.growth import Growth, fit_growth, given_growth, parse_growth

__all__ = ["Growth", "fit_growth", "given_growth", "parse_growth"]
