"""Exceptions of the store layer."""


class StoreError(Exception):
    """The database cannot be opened, migrated or written."""


class MigrationError(StoreError):
    """A schema migration failed or the database is newer than this code."""


class StoreBusy(StoreError):
    """The database stayed locked by another process longer than the wait allows, or may not be replaced now."""
