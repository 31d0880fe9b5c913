"""The operator's own modules, named in HETPOOL_PLUGINS, imported at start so that they can register routing
policies and output-length predictors written in plain Python (replay.policies.register,
replay.predictors.register). Only the operator's environment names them: no file a user uploads can import code.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

from app.exceptions import UsageError

ENV = "HETPOOL_PLUGINS"


def load_plugins(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Import each module HETPOOL_PLUGINS names (comma-separated, on the Python path); returns their names."""
    names = [n.strip() for n in environ.get(ENV, "").split(",") if n.strip()]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # any failure of the operator's module is theirs to fix, said in one line
            raise UsageError(f"{ENV}: cannot import {name!r}: {type(exc).__name__}: {exc}") from exc
    return names
