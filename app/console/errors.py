"""Turn project errors into st.error instead of a traceback."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

import streamlit as st

from app.errors import USER_ERRORS


def guarded(page: Callable[[], None]) -> Callable[[], None]:
    """Wrap a page so a user-facing error shows as one st.error line."""

    @wraps(page)
    def run() -> None:
        try:
            page()
        except USER_ERRORS as exc:
            st.error(str(exc))

    return run
