"""The Onboarding page's form to add an evidence file, as `hetpool onboarding add-evidence` does; leads only."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from app.console import auth, data, writes
from app.exceptions import USER_ERRORS
from onboarding.evidence import LOADERS
from onboarding.files import uploaded_files
from pool_registry.onboarding import item_spec

ACTION = "add_evidence"
DONE_KEY = "ev.added"


def form(path: str, pools: list[str]) -> None:
    """Pick a pool, a checklist item and its file(s), check them with the item's loader, and store them."""
    user = auth.current()
    refusal = user.reason(ACTION) if user else "Log in to add onboarding evidence."
    with st.expander("Add evidence", expanded=False):
        st.caption("Checks each file with its item's loader and stores it, replacing the item's earlier file, as "
                   "`hetpool onboarding add-evidence` does.")
        if refusal:
            st.caption(refusal)
        off = refusal is not None
        c1, c2, c3 = st.columns(3)
        pool = c1.selectbox("Pool", pools, key="ev.pool", disabled=off)
        item = c2.selectbox("Checklist item", list(LOADERS), key="ev.item", disabled=off)
        day = c3.date_input("Produced on (UTC)", value=dt.datetime.now(dt.UTC).date(), key="ev.at", disabled=off)
        roles = item_spec(item).file_roles if item else ()
        uploads = [st.file_uploader(f"{item} file" if role == "file" else f"{item} {role} file",
                                    type=["json"] if role == "report" else ["csv", "txt"],
                                    key=f"ev.file.{item}.{role}", disabled=off) for role in roles]
        ready = not off and pool is not None and all(u is not None for u in uploads)
        clicked = st.button("Add evidence", key="ev.add", disabled=not ready,
                            help=refusal or (None if ready else "Choose every file of the item first."))
        added = st.session_state.pop(DONE_KEY, None)
        if added:
            st.success(added)
        if not clicked or pool is None:
            return
        try:  # the role is checked again where the files are written: a disabled button is no guard by itself
            reg = data.registry(path)
            if reg is None:
                st.error("No registry loaded yet.")
                return
            when = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC) if isinstance(day, dt.date) else None
            texts = [(u.name, u.getvalue().decode("utf-8-sig")) for u in uploads if u is not None]
            files = uploaded_files(reg, pool, item, texts, when)
            new = writes.add_evidence(path, files, user)
        except UnicodeDecodeError as exc:
            st.error(f"An evidence file must be UTF-8 text ({exc.reason}).")
            return
        except USER_ERRORS as exc:
            st.error(str(exc))
            return
        names = ", ".join(f.name for f in files)
        st.session_state[DONE_KEY] = f"{pool} {item}: {names} checked and " + (
            "stored." if new else "unchanged since last stored.")
        st.rerun()  # redraw the cards above with the new evidence
