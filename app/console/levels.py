"""How a status level looks on every page: its colour and an icon Streamlit ships (Material Symbols, served with
the console), so it needs no emoji font on the viewer's machine."""

from __future__ import annotations

STYLE = {"ok": ("green", ":material/check_circle:"), "warning": ("orange", ":material/warning:"),
         "critical": ("red", ":material/error:")}
ACKNOWLEDGED = ":material/notifications_off:"


CELL = {"ok": "background-color: #d9f2d9", "warning": "background-color: #fbe3c4",
        "critical": "background-color: #f8d0d0"}  # a table cell of the level


def colour(level: str) -> str:
    """The colour name of a level (Streamlit's Markdown colours)."""
    return STYLE[level][0]


def icon(level: str) -> str:
    """The Material icon of a level."""
    return STYLE[level][1]


def badge(level: str) -> str:
    """Markdown of the level on its colour, with its icon: ':red-background[:material/error: critical]'."""
    c, i = STYLE[level]
    return f":{c}-background[{i} {level}]"


def coloured(level: str, text: str) -> str:
    """Markdown text (already escaped) in the level's colour, after its icon."""
    c, i = STYLE[level]
    return f":{c}[{i} {text}]"
