"""Exceptions of the collectors layer."""


class CollectorError(Exception):
    """A source that cannot be read: unreachable endpoint, unreadable file, failed query."""
