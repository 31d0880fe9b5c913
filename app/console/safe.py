"""Names from exporters and registries are untrusted: shown in Markdown, they must read as plain text."""

from __future__ import annotations

import re

# Markdown's inline punctuation (links, images, emphasis, code, tables, maths, Streamlit's :colour[...]) and
# HTML's angle brackets; names are shown mid-line, so the line-start markers (#, -, 1.) need no escape
_SPECIAL = re.compile(r"([\\`*_{}\[\]()!|<>~$])")


def md(text: object) -> str:
    """The text with every Markdown and HTML special character escaped, so it renders as written."""
    return _SPECIAL.sub(r"\\\1", str(text))
