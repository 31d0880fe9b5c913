"""Exceptions of the onboarding tracker; an evidence file's error names the file, line and column."""

from __future__ import annotations


class OnboardingError(Exception):
    """An onboarding question that cannot be answered as asked (an unknown pool or item, a missing file)."""


class EvidenceError(OnboardingError):
    """An evidence file that cannot be read: the message is `file:line:column: what is wrong`."""

    def __init__(self, source: str, line: int | None, column: int | None, message: str):
        self.source, self.line, self.column = source, line, column
        where = source + "".join(f":{n}" for n in (line, column) if n is not None)
        super().__init__(f"{where}: {message}")
