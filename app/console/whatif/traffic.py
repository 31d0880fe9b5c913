"""The Replay page's traffic picker: a window of stored requests, or an uploaded trace in any format the replay
reads. Nothing is read here but counts; the requests themselves are read when a run starts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from app.console import data
from app.console.filters import HOUR_MS, fmt_time
from app.console.safe import md
from canonical.timeunits import iso_ms
from pool_registry import Registry
from replay.whatif import Traffic, file_traffic, pick_trace, stored_traffic
from traces import FORMATS, Parsed, ParseOptions, parse_traffic
from traces.exceptions import TrafficError

STORED, UPLOAD = "Stored requests", "Upload a trace"
WINDOWS = {"Last hour": 1, "Last 6 hours": 6, "Last 24 hours": 24, "Whole trace": 0}
CUSTOM = "Custom (UTC)"
AS_IN_TRACE = "(as the trace says)"
SHOW_REJECTS = 5


@dataclass(frozen=True)
class Pick:
    """The traffic chosen on the page: what it is called and how to read it when the run starts."""

    label: str
    count: int
    load: Callable[[], Traffic]


def iso(ms: int) -> str:
    """Epoch ms as ISO 8601 in UTC, to the second, as the CLI's --start and --end take it."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ms(text: str, what: str) -> int:
    try:
        return iso_ms(text)
    except ValueError as exc:
        raise TrafficError(f"{what} {exc}") from None


def pick_traffic(path: str, registry: Registry) -> Pick | None:
    """Draw the picker; None (with the reason shown) while no usable traffic is chosen."""
    source = st.radio("Traffic", [STORED, UPLOAD], horizontal=True, key="wi.source", label_visibility="collapsed")
    return _stored(path) if source == STORED else _upload(registry)


def _stored(path: str) -> Pick | None:
    traces = data.request_traces(path)
    if traces.is_empty():
        st.info("No requests are stored yet. Upload a trace here, or load one with `hetpool ingest traffic PATH`.")
        return None
    # one trace at a time, the newest first: requests of different traces may lie years apart
    newest, why = pick_trace(traces, None)
    names = [newest, *(n for n in traces.sort("last_ms", descending=True)["trace"].to_list() if n != newest)]
    c1, c2 = st.columns(2)
    trace = c1.selectbox("Trace", names, key="wi.trace",
                         help="The stored traces, the one with the newest requests first; a replay reads one.")
    if why:
        st.caption(f"The store holds {len(names)} traces; '{md(newest)}' has the newest requests. Pick another "
                   "above.")
    rows = traces.filter(traces["trace"] == trace)
    first, last = int(rows["first_ms"].min()), int(rows["last_ms"].max())  # type: ignore[arg-type]
    window = c2.selectbox("Window", [*WINDOWS, CUSTOM], key="wi.window",
                          help="Windows end with the trace's newest request (to the second).")
    end = (last // 1000 + 1) * 1000
    if window == CUSTOM:
        c3, c4 = st.columns(2)
        st.session_state.setdefault("wi.start", iso(end - HOUR_MS))
        st.session_state.setdefault("wi.end", iso(end))
        start_text, end_text = c3.text_input("From", key="wi.start"), c4.text_input("Until", key="wi.end")
        try:
            start_ms, end_ms = _ms(start_text, "From"), _ms(end_text, "Until")
        except TrafficError as exc:
            st.error(str(exc))
            return None
        start_label, end_label = start_text.strip(), end_text.strip()
    elif WINDOWS[window]:
        start_ms, end_ms = end - WINDOWS[window] * HOUR_MS, end
        start_label, end_label = iso(start_ms), iso(end_ms)
    else:
        start_ms, end_ms = first - first % 1000, end
        start_label, end_label = iso(start_ms), iso(end_ms)
    count = data.request_count(path, trace, start_ms, end_ms)
    st.caption(f"{count:,} requests of '{md(trace)}' from {fmt_time(start_ms)} to "
               f"{fmt_time(end_ms)} UTC (stored from {fmt_time(first)} to {fmt_time(last)}).")
    if count == 0:
        st.info("No stored request arrived in this window. Pick a longer one.")
        return None

    def load() -> Traffic:
        frame, history = data.stored_window(path, trace, start_ms, end_ms)
        return stored_traffic(frame, trace=trace, start=start_label, end=end_label, start_ms=start_ms, end_ms=end_ms,
                              history=history)

    return Pick(f"{count:,} stored requests", count, load)


@st.cache_data(max_entries=8, show_spinner=False)
def _parse(content: bytes, name: str, fmt: str, model: str | None, tier: str | None,
           scale: float) -> tuple[str, Parsed]:
    return parse_traffic(content, name, fmt, ParseOptions(model=model, sla_tier=tier, time_scale=scale))


def _upload(registry: Registry) -> Pick | None:
    upload = st.file_uploader("Trace file: Azure, Mooncake, BurstGPT, or hetpool CSV, JSONL or Parquet",
                              key="wi.upload")
    c1, c2, c3, c4 = st.columns(4)
    fmt = c1.selectbox("Format", ["auto", *sorted(FORMATS)], key="wi.format")
    models = [m.id for m in registry.models]
    served = [p.serving.model for p in registry.pools if p.serving]
    st.session_state.setdefault("wi.model", max(models, key=served.count) if served else AS_IN_TRACE)
    model = c2.selectbox("Model of requests that name none", [AS_IN_TRACE, *models], key="wi.model",
                         help="Azure and BurstGPT traces name no model; without one, any pool may serve them.")
    st.session_state.setdefault("wi.tier", "standard")
    tier = c3.text_input("SLA tier of requests that name none", key="wi.tier")
    st.session_state.setdefault("wi.time_scale", 1.0)
    scale = c4.number_input("Time scale", key="wi.time_scale", step=0.5, format="%.2f",
                            help="2 replays the trace at twice its request rate.")
    if upload is None:
        st.caption("Upload a trace to replay it.")
        return None
    if not scale or scale <= 0:
        st.error(f"Time scale must be a number > 0, got {scale}")
        return None
    content = upload.getvalue()
    try:
        fmt_name, parsed = _parse(content, upload.name, fmt, None if model == AS_IN_TRACE else model,
                                  tier.strip() or None, float(scale))
    except TrafficError as exc:
        st.error(str(exc))
        return None
    if parsed.rejects.height:
        shown = "; ".join(f"line {r['line']}: {r['reason']}" for r in parsed.rejects.head(SHOW_REJECTS).iter_rows(
            named=True))
        more = f" (and {parsed.rejects.height - SHOW_REJECTS} more)" if parsed.rejects.height > SHOW_REJECTS else ""
        st.error(f"{upload.name}: {parsed.rejects.height} of {parsed.read} rows rejected: {shown}{more}. "
                 + ("The replay uses the rows that were read." if parsed.frame.height else "No row is left to replay."))
    if parsed.frame.height == 0:
        return None
    st.caption(f"{upload.name}: {parsed.frame.height:,} requests read as {fmt_name}.")
    traffic = file_traffic(upload.name, fmt_name, parsed)
    return Pick(f"{parsed.frame.height:,} requests of {upload.name}", parsed.frame.height, lambda: traffic)
