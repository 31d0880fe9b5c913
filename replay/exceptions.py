"""Exceptions of the replay layer; messages quote the offending value."""

from __future__ import annotations

from pool_registry import ConfigError


class ReplayError(Exception):
    """A replay that cannot be run as asked."""


class UnknownNameError(ReplayError):
    """A policy, predictor or overflow mode that is not registered."""


class CandidateError(ConfigError):
    """A candidate YAML file that cannot be used."""


class GateError(ConfigError):
    """A gate YAML file that cannot be used."""


class GridError(ConfigError):
    """A sweep grid YAML file that cannot be used."""


class BenchTableError(ReplayError):
    """A benchmark table (CSV) that cannot be used; the message names file, line and column."""


class RunwayError(ReplayError):
    """A runway that cannot be computed from the traffic as stored or the options as given."""
