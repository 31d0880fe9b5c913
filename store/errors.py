"""Exceptions of the store layer."""


class StoreError(Exception):
    """The database cannot be opened, migrated or written."""


class MigrationError(StoreError):
    """A schema migration failed or the database is newer than this code."""
