"""Exceptions of the trace layer; messages name the file and quote the offending value."""


class TrafficError(Exception):
    """A trace that cannot be read at all (as opposed to single bad rows, which are rejected)."""


class UnknownFormatError(TrafficError):
    """A trace format that is not registered."""
