"""hetpool ingest ...: the command group every source adds its subcommand to."""

from __future__ import annotations

import argparse

from app.commands import Command, add_commands

HELP = "bring metrics or traffic into the database"

# Each source's module exposes register(group, common) and adds its `hetpool ingest <source>` commands; a module is
# imported only when one of its commands is parsed, so `hetpool ingest --help` and one source's --help load no
# other source's layers. The help lines are the ones the modules give (tests/test_commands.py checks they agree).
SOURCES: dict[str, Command] = {
    "traffic": Command("ingest_traffic", "load a request trace (Azure, Mooncake, BurstGPT, or hetpool "
                                         "CSV/JSONL/Parquet) into the requests table"),
    "file": Command("ingest_file", "ingest an exporter's /metrics text (Prometheus or OpenMetrics format) from a "
                                   "file, streaming, with vendor profiles detected per metric"),
    "scrape": Command("ingest_file", "scrape a live /metrics endpoint, once or every interval; each scrape is its "
                                     "own ingest run"),
    "prometheus": Command("ingest_prometheus", "pull the series every profile knows from a Prometheus-API store "
                                               "(Prometheus, Thanos, Mimir, VictoriaMetrics), chunk by chunk from "
                                               "the last watermark; credentials come from $HETPOOL_PROM_TOKEN or "
                                               "$HETPOOL_PROM_USER/$HETPOOL_PROM_PASSWORD"),
}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the ingest group, every source listed and none of their modules imported yet."""
    group = sub.add_parser("ingest", help=HELP, description=HELP)  # as add_group, with a lazy subcommand set
    add_commands(group, common, SOURCES, dest="ingest_command")
