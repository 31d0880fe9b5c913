"""The hetpool command run in-process, as a test reads it: exit code, stdout and stderr."""

from __future__ import annotations

import pytest

from app.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `hetpool *argv` and return (exit code, stdout, stderr)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
