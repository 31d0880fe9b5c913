"""A number with its change, as st.metric draws it, read right at a glance: a change that shows as zero is grey,
says "no change" and carries no arrow, so that it never reads as getting better or worse."""

from __future__ import annotations

import re
from typing import Any, Literal

Tone = Literal["normal", "inverse", "off"]
NO_CHANGE = "no change"
_DIGITS = re.compile(r"\d")


def shows_zero(change: str) -> bool:
    """True when the change as written is zero at its precision ('+0.0 pp', '-0.00 s', '+0', '+0.0%')."""
    digits = "".join(_DIGITS.findall(change))
    return bool(digits) and not digits.strip("0")


def metric(where: Any, label: str, value: str, change: str | None, tone: Tone) -> None:
    """where.metric with the change (None: no change shown, a side has no data) coloured by `tone` (normal: a
    rise is good; inverse: a rise is bad; off: neither), neutral when it shows as zero."""
    if change is not None and shows_zero(change):
        where.metric(label, value, NO_CHANGE, delta_color="off", delta_arrow="off")
    else:
        where.metric(label, value, change, delta_color=tone)
