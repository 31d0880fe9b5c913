"""Two regions of one fleet, each a hetpool of its own: a registry, a DuckDB file, an exporter scrape, a feed.

East runs the example fleet's H100 and Ascend pools as `east-h100-a` and `east-ascend-a`, west its MI300X and
Gaudi 3 pools as `west-mi300x-a` and `west-gaudi3-a` (ids, and node patterns, prefixed with the region). Each
region ingests one raw exporter scrape with a fatal error in it: east the example DCGM scrape of one H100 node
with GPU 0's last XID set to 79 (fallen off the bus), west an AMD device-metrics-exporter scrape of one MI300X
node whose GPU 0 counts two uncorrectable ECC errors.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.cli import main
from app.serve.feed import FeedServer, store_reader
from canonical.metrics import ERRORS_METRIC, METRICS
from store import Store
from tests.conftest import FLEET, REPO

AT = "2026-11-29T08:00:00Z"  # when each region's scrape was taken (the files carry no timestamps)
AT_MS = int(dt.datetime.fromisoformat(AT).timestamp() * 1000)
POOLS = {"east": ("h100-a", "ascend-a"), "west": ("mi300x-a", "gaudi3-a")}
EAST_NODE, WEST_NODE = "east-h100-a-01", "west-mi300x-a-01"
MIB = 1024 * 1024

# West's MI300X node, two GPUs: values per GPU of each family, every one a gauge as the exporter serves them
AMD = {"gpu_gfx_activity": (55, 60), "gpu_used_vram": (150_000, 120_000), "gpu_total_vram": (196_592, 196_592),
       "gpu_power_usage": (650, 640), "gpu_junction_temperature": (70, 68), "gpu_ecc_uncorrect_total": (2, 0)}


def fleet_file(work: Path, regions: tuple[str, ...]) -> Path:
    """A registry of the example fleet's chips and models with the pools of `regions`, ids prefixed."""
    fleet = yaml.safe_load(FLEET.read_text())
    pools = []
    for region in regions:
        for pool in fleet["pools"]:
            if pool["id"] in POOLS[region]:
                assign = {"node_pattern": f"{region}-{pool['assign']['node_pattern']}"}
                pools.append({**pool, "id": f"{region}-{pool['id']}", "assign": assign})
    path = work / f"{'-'.join(regions)}.yaml"
    path.write_text(yaml.safe_dump({**fleet, "name": "-".join(regions), "pools": pools}, sort_keys=False))
    return path


def east_scrape() -> str:
    """The example DCGM scrape, its host in east, GPU 0's last XID 79 (the file's last line but one)."""
    text = (REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom").read_text()
    lines = text.replace('Hostname="h100-a-01"', f'Hostname="{EAST_NODE}"').splitlines()
    assert lines[-2].startswith('DCGM_FI_DEV_XID_ERRORS{gpu="0"') and lines[-2].endswith("} 0"), lines[-2]
    lines[-2] = lines[-2][:-1] + "79"
    return "\n".join(lines) + "\n"


def west_scrape() -> str:
    """An AMD device-metrics-exporter scrape of west's MI300X node."""
    out = []
    for family, values in AMD.items():
        out.append(f"# TYPE {family} gauge\n")
        out += [f'{family}{{card_model="MI300X",driver_version="6.10.5",gpu_id="{gpu}",hostname="{WEST_NODE}"}} '
                f"{value}\n" for gpu, value in enumerate(values)]
    return "".join(out)


def hetpool(*args: str) -> int:
    """One hetpool command in this process."""
    return main(list(args))


@dataclass
class Region:
    """One region: its store and the feed serving it."""

    name: str
    db: Path
    feed: FeedServer

    @property
    def host_port(self) -> str:
        """The feed's address as a scrape target."""
        return self.feed.url.removeprefix("http://")


def start_region(work: Path, name: str) -> Region:
    """Load the region's registry, ingest its scrape as taken at AT and serve its feed on a free loopback port."""
    db = work / f"{name}.duckdb"
    scrape = work / f"{name}.prom"
    scrape.write_text(east_scrape() if name == "east" else west_scrape())
    assert hetpool("--db", str(db), "registry", "load", str(fleet_file(work, (name,)))) == 0
    assert hetpool("--db", str(db), "ingest", "file", str(scrape), "--at", AT) == 0
    feed = FeedServer("127.0.0.1", 0, store_reader(Store(db)), refresh_s=0.0).start()
    return Region(name, db, feed)


Key = tuple[str, str, str, str, str]  # pool, node, device, metric, attributes


def query(db: Path, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Rows of one read-only query, through the store: a region's feed in this process may be reading the same
    file at that moment, and a bare connect would then fail where the store waits for it."""
    with Store(db).read() as con:
        return con.execute(sql, params).fetchall()


def latest(db: Path) -> dict[Key, float]:
    """The newest value of every gauge and counter series."""
    kinds = [m for m, c in METRICS.items() if c.kind in ("gauge", "counter")]
    rows = query(db, f"SELECT pool, node, device, metric, attributes, arg_max(value, ts) FROM samples "
                     f"WHERE metric IN ({', '.join('?' for _ in kinds)}) GROUP BY ALL", kinds)
    return {(p, n, d, m, a): float(v) for p, n, d, m, a, v in rows}


Event = tuple[str, str, str, str, str, str]  # pool, node, device, error_class, severity, code


def events(db: Path) -> dict[Event, tuple[int, float]]:
    """Error events per device, class, severity and code: how many rows, and their summed count."""
    rows = query(db, "SELECT pool, node, device, json_extract_string(attributes, '$.error_class'), "
                     "json_extract_string(attributes, '$.severity'), json_extract_string(attributes, '$.code'), "
                     "count(*), sum(value) FROM samples WHERE metric = ? GROUP BY ALL", [ERRORS_METRIC])
    return {tuple(r[:6]): (int(r[6]), float(r[7])) for r in rows}


def versions(db: Path) -> set[tuple[str, str, str, str, str]]:
    """Pool, node, device, component and version of every versions row."""
    return {tuple(r) for r in query(db, "SELECT pool, node, device, component, version FROM versions", [])}


def iso(epoch_s: int) -> str:
    """A whole second as the CLI's ISO time."""
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
