"""Exceptions of the normalizer layer."""

from __future__ import annotations

from pool_registry import ConfigError


class NormalizerError(Exception):
    """Raw samples cannot be normalized as asked (an unknown profile, a bad option)."""


class UnknownProfileError(NormalizerError):
    """A profile name that no loaded profile file defines."""


class ProfileError(ConfigError):
    """A profile YAML file that cannot be used; every problem names file, line and field."""
