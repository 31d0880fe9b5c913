"""hetpool init: create or upgrade the database."""

from __future__ import annotations

import argparse

from app.commands._base import Context, add_command


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the init command."""
    add_command(sub, "init", help="create the DuckDB file, or bring its schema up to date",
                example="hetpool --db fleet.duckdb init", handler=run, common=common)


def run(ctx: Context) -> int:
    """Open the database writable, which applies pending migrations."""
    from store import schema_version  # here, not at the top: `hetpool init --help` needs no DuckDB

    with ctx.store().write("hetpool init") as con:
        version = schema_version(con)
    ctx.emit({"db": str(ctx.db_path), "schema_version": version},
             f"database {ctx.db_path} is at schema version {version}")
    return 0
