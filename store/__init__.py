"""DuckDB store: the only layer that holds SQL and opens connections."""

from store.db import DEFAULT_DB, ENV_DB, Access, Held, Store, connect, resolve_db_path, schema_version, transaction
from store.exceptions import MigrationError, StoreBusy, StoreError
from store.ingest import IngestCounts, IngestRun, StaleStage, commit_run
from store.snapshots import Snapshot, latest_registry, require_registry, save_registry

__all__ = [
    "DEFAULT_DB", "ENV_DB", "Access", "Held", "IngestCounts", "IngestRun",
    "MigrationError", "Snapshot", "StaleStage", "Store", "StoreBusy", "StoreError", "commit_run", "connect",
    "latest_registry", "require_registry", "resolve_db_path", "save_registry", "schema_version", "transaction",
]
