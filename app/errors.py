"""Which exceptions are the user's to fix: the CLI prints them as one line and exits 2."""

from __future__ import annotations

from access import AccessDenied
from collectors.errors import CollectorError
from normalizers import NormalizerError
from onboarding import OnboardingError
from pool_registry import ConfigError
from replay.errors import ReplayError
from store import StoreError


class UsageError(Exception):
    """A bad argument that argparse could not catch by itself."""


USER_ERRORS: tuple[type[BaseException], ...] = (UsageError, ConfigError, StoreError, CollectorError, ReplayError,
                                                  NormalizerError, OnboardingError, AccessDenied)
