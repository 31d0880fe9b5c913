"""What the replay's registries (policies, predictors) share: adding one written anywhere in plain Python."""

from __future__ import annotations

from typing import TypeVar

from replay.exceptions import ReplayError

T = TypeVar("T")


def add(registry: dict[str, T], item: T, kind: str, required: tuple[str, ...], protocol: str) -> T:
    """Add `item` under its `name` and return it; a missing name or attribute, or a name another item holds, is an
    error naming the `protocol` to follow."""
    name = getattr(item, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ReplayError(f"a {kind} needs a name, a non-empty string; got {name!r}")
    missing = [a for a in required if not hasattr(item, a)]
    if missing:
        raise ReplayError(f"{kind} '{name}' lacks {', '.join(missing)} ({protocol})")
    known = registry.get(name)
    if known is not None and known is not item:
        raise ReplayError(f"{kind} '{name}' is registered already; known: {', '.join(registry)}")
    registry[name] = item
    return item
