"""Shared fixtures: repository paths, the reference corpus, and real temporary DuckDB files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from pool_registry import Registry, load_registry
from store import connect, save_registry

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "examples" / "fleet.yaml"


def corpus_dir() -> Path:
    """The shared reference corpus: $HETPOOL_CORPUS, else ../shared/corpus beside the checkout."""
    return Path(os.environ.get("HETPOOL_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """Path of the reference corpus; the suite needs it, so its absence is a failure, not a skip."""
    path = corpus_dir()
    assert path.is_dir(), f"reference corpus not found at {path}; set HETPOOL_CORPUS"
    return path


@pytest.fixture(scope="session")
def fleet() -> Registry:
    """The example fleet."""
    return load_registry(FLEET)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a fresh DuckDB file."""
    return tmp_path / "hetpool.duckdb"


@pytest.fixture
def con(db_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A migrated, empty database."""
    c = connect(db_path)
    yield c
    c.close()


@pytest.fixture
def fleet_db(db_path: Path, fleet: Registry) -> Path:
    """A database holding the example fleet as its registry, closed so other processes can open it."""
    c = connect(db_path)
    save_registry(c, fleet, str(FLEET))
    c.close()
    return db_path


# A small demo: one day ending at a fixed hour, two devices per pool (two nodes each), the default seed.
DEMO_ARGS = ("--days", "1", "--devices-per-pool", "2", "--end", "2026-11-29T08:00:00Z", "--seed", "7")


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small demo database, built once per session through `hetpool demo`; open it read-only."""
    from app.cli import main

    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    assert main(["--db", str(path), "demo", *DEMO_ARGS]) == 0
    return path
