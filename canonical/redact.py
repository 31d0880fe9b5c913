"""Credentials never written down: what a server echoes back is redacted before it is stored or printed."""

from __future__ import annotations

import re

HIDDEN = "<redacted>"
_PATTERNS = (
    # an Authorization header, or any Bearer/Basic credential, as a server may echo it
    re.compile(r"(?i)(authorization\s*[:=]\s*)(?:bearer|basic|token)?\s*[^\s,;\"'}]+"),
    re.compile(r"(?i)\b(bearer\s+|basic\s+)[A-Za-z0-9._~+/=-]+"),
    # key=value or "key": "value" pairs whose key names a secret
    re.compile(r"(?i)([\"']?(?:password|passwd|secret|token|api[_-]?key|access[_-]?key)[\"']?\s*[:=]\s*[\"']?)"
               r"[^\s,;&\"'}]+"),
    # user:password@ in a URL
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+(?=@)"),
)


def redact(text: str) -> str:
    """The text with every credential-looking value replaced by <redacted>."""
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + HIDDEN, text)
    return text
