"""Names from exporters and registries are untrusted: shown in Markdown, they must read as plain text."""

from __future__ import annotations

import re

# Markdown's inline punctuation (emphasis, code, tables, maths, and the brackets every link, image and
# Streamlit :colour[...] needs) and HTML's angle brackets; names are shown mid-line, so the line-start
# markers (#, -, 1.) need no escape, and without a bracket a parenthesis or ! is plain text
_SPECIAL = re.compile(r"([\\`*_{}\[\]|<>~$])")


# what Markdown makes a link of without any brackets (GFM's autolinks, found in the text after escapes are
# resolved, so an escape does not stop them): a scheme's "://" and "www."; a zero-width space breaks both
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(?=://)|(?<=\bwww)(?=\.)")
ZWSP = "\u200b"


def md(text: object) -> str:
    """The text with every Markdown and HTML special character escaped, so it renders as written, and URLs
    broken by a zero-width space so that none becomes a link."""
    return _AUTOLINK.sub(ZWSP, _SPECIAL.sub(r"\\\1", str(text)))
