"""Tables of text that wrap rather than cut: st.table shows every cell whole, wrapping long text on the page's
width, where st.dataframe's grid cuts a cell at its column's width with no hint. Every cell is escaped as
Markdown (st.table renders Markdown), a missing value reads "–", and a cell may be coloured by its value."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pandas as pd
import polars as pl
import streamlit as st

from app.console.safe import md

MISSING = "–"
CUT = "A cell cut at the edge of its column shows whole when you click it."
_ESCAPE = re.compile(r"\\(.)")


def text(value: object) -> str:
    """A cell as plain text: a dash for a missing value, whole numbers without '.0'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float) and value.is_integer():
        return f"{value:,.0f}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def plain(cell: str) -> str:
    """A shown cell back as its text (the Markdown escapes removed): what a reader sees."""
    return _ESCAPE.sub(r"\1", cell).replace("\u200b", "")


def wrapped(frame: pl.DataFrame | pd.DataFrame, colour: Callable[[str], str] | None = None,
            columns: list[str] | None = None) -> None:
    """Draw the frame as a wrapping table: `columns` (default all) as text, each cell styled by colour(text) (CSS
    such as 'background-color: #f8d0d0', or '')."""
    data = frame.to_pandas() if isinstance(frame, pl.DataFrame) else frame
    if columns is not None:
        data = data[columns]
    raw = data.map(text) if len(data.columns) else data
    shown = raw.map(md) if len(data.columns) else raw
    if colour is None:
        st.table(shown, hide_index=True)
        return
    styles = raw.map(colour)
    st.table(shown.style.apply(lambda _: styles, axis=None), hide_index=True)
