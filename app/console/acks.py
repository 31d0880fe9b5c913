"""Acknowledgements: the Alertmanager silences that cover the statuses the console shows, and a lead's silence
of a node from the Node page.

The Alertmanager is the one `hetpool serve` sends to (it sets HETPOOL_ALERTMANAGER_URL for its console), else
$HETPOOL_ALERTMANAGER_URL or the `hetpool_alertmanager_url` secret; without one, nothing is acknowledged and the
pages say so. Its credentials come from the environment (see app/alertmanager.py).
"""

from __future__ import annotations

import dataclasses
import os
import time

import streamlit as st

from access import Decision, require
from app.alertmanager import ENV_URL, Alertmanager, AlertmanagerError
from app.console import auth, cache, data, filters, levels
from app.console.safe import md
from status.evaluate import Status, evaluate
from status.rules import load_rules
from status.silences import Silence, SilenceError, acknowledgement, node_silence

SECRET_URL = "hetpool_alertmanager_url"
SILENCES_TTL_S = 15
ACTION = "silence_alerts"


def alertmanager_url() -> str | None:
    """The Alertmanager of this console: $HETPOOL_ALERTMANAGER_URL, else the secret, else none."""
    env = os.environ.get(ENV_URL)
    if env:
        return env
    try:
        secret = st.secrets.get(SECRET_URL)
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        secret = None
    return str(secret) if secret else None


@st.cache_data(ttl=SILENCES_TTL_S, show_spinner=False)
def _silences(url: str) -> tuple[tuple[Silence, ...], str | None]:
    # the failure is kept as long as an answer, so a down Alertmanager costs one timeout per TTL, not per page
    try:
        return Alertmanager(url, timeout_s=3.0).silences(), None
    except AlertmanagerError as exc:
        return (), str(exc)


def silences() -> tuple[tuple[Silence, ...], str | None]:
    """The Alertmanager's silences, and why there are none to read (no Alertmanager, or it cannot be reached)."""
    url = alertmanager_url()
    return ((), None) if url is None else _silences(url)


def statuses_now(path: str, view: filters.View) -> tuple[Status, ...]:
    """The status rules on the view (the collectors' lag measured against the clock now)."""
    reg = data.registry(path)
    assert reg is not None
    facts = data.status_facts(path, view.start_ms, view.end_ms, view.pools)
    facts = dataclasses.replace(facts, now_ms=int(time.time() * 1000))
    return evaluate(reg, load_rules(), facts, view.pools)


def acknowledged(path: str, statuses: tuple[Status, ...]) -> dict[Status, Silence]:
    """Each status an active silence covers, with the silence (the one lasting longest)."""
    found, _ = silences()
    reg = data.registry(path)
    if not found or reg is None:
        return {}
    out = {}
    for s in statuses:
        silence = acknowledgement(s, reg, found)
        if silence is not None:
            out[s] = silence
    return out


def unreachable_note() -> None:
    """Say so when the Alertmanager cannot be read (the statuses are then shown unacknowledged)."""
    _, problem = silences()
    if problem:
        st.warning(f"Acknowledgements are not shown: {md(problem)}.")


def status_panel(pool: str, node: str, device: str | None, view: filters.View) -> None:
    """The status of the node (or of one of its devices) with its acknowledgement, if any."""
    path = cache.db_path()
    scope, what = ("node", "node") if device is None else ("device", "device")
    statuses = [s for s in statuses_now(path, view)
                if s.pool == pool and s.node == node and s.scope == scope and (device is None or s.device == device)]
    acks = acknowledged(path, tuple(statuses))
    unreachable_note()
    if not statuses:
        st.success(f"Status ok: no status rule fires on this {what} in this window.")
    for s in statuses:
        # in the level's colour, as on Fleet health; a finding, not a failure of the page: st.error stays for
        # what went wrong here
        text = f"{levels.badge(s.level)} Status **{s.level}**: {md(s.reason)}"
        silence = acks.get(s)
        said = silence.text() if silence is not None else ""
        with st.container(border=True):
            st.markdown(f"{text}. {levels.ACKNOWLEDGED} {md(said[:1].upper() + said[1:])}" if silence is not None
                        else f"{text}. Not acknowledged.")


def node_panel(pool: str, node: str, view: filters.View) -> None:
    """The node's status, its acknowledgement, and (for a lead, with an Alertmanager) a form to silence it."""
    status_panel(pool, node, None, view)
    url = alertmanager_url()
    if url is None:
        st.caption("No Alertmanager is configured for this console (HETPOOL_ALERTMANAGER_URL), so this node's alerts "
                   "cannot be silenced from here.")
        return
    decision = auth.current()
    refusal = decision.reason(ACTION) if decision is not None else "Nobody is logged in."
    with st.expander("Acknowledge: silence this node's alerts", expanded=False):
        if refusal:
            st.caption(md(refusal))
        with st.form(f"silence.{pool}.{node}"):
            comment = st.text_input("Comment (what is being done)", key="silence.comment", disabled=bool(refusal))
            hours = st.number_input("For hours", min_value=0.25, max_value=720.0, value=4.0, step=0.25,
                                    key="silence.hours", disabled=bool(refusal))
            sent = st.form_submit_button("Silence", disabled=bool(refusal))
        if sent:
            try:
                silence_id = create_node_silence(url, pool, node, comment, float(hours), decision)
            except (AlertmanagerError, SilenceError) as exc:
                st.error(f"No silence was created: {md(str(exc))}.")
            else:
                st.success(f"Silenced node {md(node)} for {float(hours):g} h (silence {md(silence_id)}).")
                st.rerun()


def create_node_silence(url: str, pool: str, node: str, comment: str, hours: float,
                        decision: Decision | None) -> str:
    """Create the silence of one node with the signed-in user as createdBy; its id. Refused with AccessDenied,
    before Alertmanager is asked, unless the user is a lead."""
    require(decision, ACTION)
    assert decision is not None
    who = decision.identity.email or decision.identity.label
    body = node_silence(pool, node, who, comment, hours, int(time.time() * 1000))
    silence_id = Alertmanager(url, timeout_s=5.0).create_silence(body)
    _silences.clear()
    return silence_id
