"""Names from exporters and registries are untrusted: shown in Markdown, they must read as plain text."""

from __future__ import annotations

import re

# Markdown's inline punctuation (emphasis, code, tables, maths, and the brackets every link, image and
# Streamlit :colour[...] needs) and HTML's angle brackets; names are shown mid-line, so the line-start
# markers (#, -, 1.) need no escape, and without a bracket a parenthesis or ! is plain text
_SPECIAL = re.compile(r"([\\`*_{}\[\]|<>~$])")


def md(text: object) -> str:
    """The text with every Markdown and HTML special character escaped, so it renders as written."""
    return _SPECIAL.sub(r"\\\1", str(text))
