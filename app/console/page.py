"""The opening every page on the sidebar's window shares: its title, the view, the database and the registry."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.console import cache, data, filters
from pool_registry import Registry


@dataclass(frozen=True)
class Opened:
    """What a page draws from: the database it reads, the sidebar's view and the newest registry."""

    path: str
    view: filters.View
    registry: Registry


def begin(title: str, label: bool = True) -> Opened | None:
    """Draw the page's title and, with `label`, the window as a caption; None (with what is missing said on the
    page) when the store holds no registry or no samples yet."""
    st.title(title)
    view = filters.current()
    if view is None:
        return None
    path = cache.db_path()
    registry = data.registry(path)
    assert registry is not None  # the sidebar draws no view without one
    if label:
        st.caption(view.label())
    return Opened(path, view, registry)
