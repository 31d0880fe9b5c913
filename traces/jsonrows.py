"""JSON Lines to Python records with line numbers; a line that is not a JSON object becomes a reject."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from traces.csvrows import decode


def records(data: bytes, source: str) -> Iterator[tuple[int, str, dict[str, Any] | None, str | None]]:
    """Yield (line, text, object or None, reason or None) for every non-blank line."""
    for number, line in enumerate(decode(data, source).splitlines(), start=1):
        text = line.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            yield number, text, None, f"not JSON ({exc.msg} at column {exc.colno})"
            continue
        except ValueError:  # json reads an integer of thousands of digits only to refuse it
            yield number, text, None, "not JSON that can be read (a number of more than 4300 digits)"
            continue
        except RecursionError:
            yield number, text, None, "not JSON that can be read (nested too deeply)"
            continue
        if not isinstance(obj, dict):
            yield number, text, None, f"expected a JSON object, got {type(obj).__name__}"
            continue
        if _SURROGATE.search(text) and not _unicode(obj):
            # JSON may escape half of a UTF-16 pair alone; no text column can hold it
            yield number, text, None, "a string with a lone surrogate escape (such as \\ud800): not Unicode text"
            continue
        yield number, text, obj, None


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _unicode(value: Any) -> bool:
    """Whether every string in a JSON value (keys too) is Unicode text, without lone surrogates."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_text(value: Any) -> str | None:
    """A JSON scalar as text for typed validation later; absent or null stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 2**53 else repr(value)
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value)
