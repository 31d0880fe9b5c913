"""Collectors: what `hetpool serve` reports of each collector, and what every source stored last."""

from __future__ import annotations

import datetime as dt
import os

import polars as pl
import streamlit as st

from app.console import cache, data, filters, service, tables
from app.console.safe import md

ENV_HEALTH_URL = "HETPOOL_HEALTH_URL"
HEALTH_TEXT = ("A collector is **unhealthy** when its last run failed, when it has brought no device data yet "
               "(a target that serves no device metrics), or when its newest data lags behind now by more than its "
               "limit.")


def _when(stamp: object) -> str:
    """A time of the health report (ISO 8601 UTC; seconds since the epoch from an older serve) as text."""
    if isinstance(stamp, int | float):
        return dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if not isinstance(stamp, str) or not stamp:
        return "–"
    try:
        moment = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def service_panel(url: str) -> None:
    """The live status of the collectors of the `hetpool serve` this console belongs to."""
    report = service.service_health(url)
    collectors = report.get("collectors", [])
    if report.get("status") == "healthy":
        st.success(f"All {len(collectors)} collectors are healthy.")
    else:
        st.error("Unhealthy: " + "; ".join(report.get("problems", [])))
    st.caption(HEALTH_TEXT)
    rows = [{"collector": c["name"], "kind": c["kind"], "source": c["source"],
             "status": "healthy" if c["healthy"] else "unhealthy", "problems": "; ".join(c["problems"]),
             "last run": _when(c["last_run_at"]), "lag (s)": c["lag_s"], "every (s)": c["every_s"],
             "last read": c["last"]["read"], "last stored": c["last"]["stored"],
             "last rejected": c["last"]["rejected"], "last ignored": c["last"].get("ignored", 0),
             "last folded": c["last"].get("folded", 0), "failures since success": c.get("failures_since_success", 0),
             "stored in all": c["total_stored"],
             "rejected in all": c["total_rejected"], "last error": c["last_error"] or ""} for c in collectors]
    tables.wrapped(pl.DataFrame(rows) if rows else pl.DataFrame())
    alerting = report.get("alertmanager")
    if isinstance(alerting, dict):
        alerts_panel(alerting)


def alerts_panel(am: dict[str, object]) -> None:
    """The alert sender of `hetpool serve`: where it sends, and whether the last send reached Alertmanager."""
    st.subheader("Alerts to Alertmanager")
    where = f"{md(str(am['url']))} every {am['every_s']:g} s"
    if am.get("healthy"):
        st.success(f"Alerts reach {where}: {am['firing']} firing, {am['resolved']} resolved so far; last sent "
                   f"{_when(am.get('last_ok_at'))}.")
    else:
        st.error(f"Alerts do not reach {where}: {am['failures_since_success']} send(s) failed since the last "
                 f"success ({_when(am.get('last_ok_at'))}); next attempt {_when(am.get('next_attempt_at'))}. "
                 f"Collection goes on. Last error: {md(str(am.get('last_error')))}")


def render() -> None:
    """Live service status when running under `hetpool serve`, then the stored record of every source."""
    st.title("Collectors")
    url = os.environ.get(ENV_HEALTH_URL)
    if url:
        service_panel(url)
    else:
        st.info("This console does not run under `hetpool serve`, so no live collector status is reported. "
                "Below is what every source stored, from the database's ingest runs.")
    st.subheader("Sources, by their last ingest run")
    if filters.narrowed() is not None:
        st.caption("The sidebar's pool filter does not apply here: an ingest run is recorded by its source (a file, "
                   "a scrape, a pull, the demo's exporters), which may feed several pools.")
    sources = data.ingest_sources(cache.db_path())
    if sources.is_empty():
        st.info("No ingest run yet. Bring metrics in with `hetpool ingest` or `hetpool serve`.")
        return
    failed = sources.filter(pl.col("last_status") == "failed")
    if failed.height:
        st.warning(f"{failed.height} source(s) failed on their last run: "
                   f"{', '.join(md(s) for s in failed['source'].to_list())}.")
    table = sources.select(
        "kind", "source", "runs",
        pl.format("{} {}", pl.col("last_run").dt.strftime("%Y-%m-%d %H:%M:%S"), "last_status").alias(
            "last run (UTC)"),
        pl.format("read {}: stored {}, rejected {}, duplicates {}, ignored {}", *(_thousands(pl.col(c)) for c in (
            "last_read", "last_stored", "last_rejected", "last_duplicates", "last_ignored"))).alias("last run's rows"),
        pl.format("stored {}, rejected {}; {} failed run(s)", *(_thousands(pl.col(c)) for c in (
            "stored", "rejected", "failed_runs"))).alias("all runs"),
        pl.from_epoch("newest_sample_ms", time_unit="ms").dt.strftime("%Y-%m-%d %H:%M:%S").alias(
            "newest sample (UTC)"))
    st.caption("The demo's build writes its exporters' text through the same ingest as `hetpool ingest file`: one "
               "source per node, kind demo. Duplicates are rows already stored and readings folded (an error code "
               "with no new event).")
    tables.wrapped(table)


def _thousands(column: pl.Expr) -> pl.Expr:
    return column.map_elements(lambda v: f"{v:,}", return_dtype=pl.String)


if __name__ == "__main__":
    render()
