"""Which exceptions are the user's to fix: the CLI prints them as one line and exits 2.

The layers' exception classes are imported only when asked for (user_errors(), or the USER_ERRORS name), so that
the CLI can print its help without loading the layers.
"""

from __future__ import annotations

import importlib
from functools import cache


class UsageError(Exception):
    """A bad argument that argparse could not catch by itself."""


# module, class: each layer's exception for what the user can fix
_LAYER_ERRORS = (("pool_registry", "ConfigError"), ("store", "StoreError"), ("collectors.exceptions", "CollectorError"),
                 ("replay.exceptions", "ReplayError"), ("traces.exceptions", "TrafficError"),
                 ("normalizers", "NormalizerError"), ("onboarding", "OnboardingError"), ("access", "AccessDenied"))


@cache
def user_errors() -> tuple[type[BaseException], ...]:
    """UsageError and every layer's user error, imported on first use."""
    return (UsageError, *(getattr(importlib.import_module(m), name) for m, name in _LAYER_ERRORS))


def __getattr__(name: str) -> tuple[type[BaseException], ...]:
    if name == "USER_ERRORS":  # `from app.exceptions import USER_ERRORS` keeps working for the console
        return user_errors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
