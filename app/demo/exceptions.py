"""Errors of the demo builder."""

from __future__ import annotations

from app.exceptions import UsageError


class DemoError(UsageError):
    """A demo that cannot be built as asked (bad size, unknown dialect); the CLI prints it as one line."""
