"""The serve YAML: which collectors run on which schedule, and where the console and health endpoint listen.

    database: ../demo/hetpool.duckdb        # optional; --db and $HETPOOL_DB win; relative to this file
    console: {enabled: true, address: 127.0.0.1, port: 8501}
    health: {address: 127.0.0.1, port: 8502}
    collectors:
      - {name: prom, kind: prometheus, url: http://prometheus:9090, every: 15s, since: 1h}
      - {name: gpu-1, kind: scrape, url: http://gpu-node-1:9400/metrics, every: 15s}
      - {name: edge, kind: scrape, url: http://edge:9464/metrics, canonical: true}   # another hetpool's feed
      - {name: drop, kind: folder, path: ../demo/drop, every: 10s}
    export: {out: ../demo/lake, every: 1h, pools: [h100-a], metrics: [accelerator.power]}   # optional
    feed: {enabled: true, address: 127.0.0.1, port: 9464, window: 5m}                      # optional
    alertmanager: {url: http://alertmanager:9093, every: 1m, console_url: https://hetpool.example}  # optional
    runway: {every: 1d, candidate: candidates/sla_cost.yaml, window: 28d, growth: auto, horizon: 26w}  # optional

`canonical: true` on a prometheus or scrape collector reads canonical series (the names and labels of the feed
and of `hetpool rules`, as `hetpool ingest ... --canonical`): no profile, the pool from each series' label,
and for a pull one sample per `every`. Such a collector takes no profile, profiles_dir, pool or node.

Relative paths are relative to the file, as Prometheus reads its own configuration. Credentials are never
part of this file: a Prometheus pull takes them from HETPOOL_PROM_TOKEN or HETPOOL_PROM_USER/PASSWORD, and
the feed's bearer token comes from HETPOOL_FEED_TOKEN, Alertmanager's from HETPOOL_ALERTMANAGER_TOKEN (or
HETPOOL_ALERTMANAGER_USER/PASSWORD). Without an `export` section nothing is exported; without a `feed` section
no feed is served; without an `alertmanager` section no alert is sent. With a `runway` section the capacity
runway (`hetpool replay runway`) is computed at start and then every `every` (default 1d) and stored; with
Alertmanager too, a pool whose runway is shorter than `alertmanager.runway_alert_weeks` (default 4) pages.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from yaml.nodes import MappingNode, Node

from canonical.metrics import METRICS
from canonical.timeunits import parse_duration_ms
from collectors.service import KINDS, Collector, DropFolder, PrometheusPull, ScrapeTarget
from pool_registry import ConfigError, Reader
from pool_registry.yamlread import read_text


class ServeConfigError(ConfigError):
    """A serve YAML file that cannot be used."""


@dataclass(frozen=True)
class Listener:
    """Where a server listens."""

    enabled: bool
    address: str
    port: int


@dataclass(frozen=True)
class FeedListener(Listener):
    """Where the feed listens, and how old a series' newest sample may be to be served."""

    window_ms: int = 5 * 60_000


@dataclass(frozen=True)
class ExportPlan:
    """The lake export `hetpool serve` runs every `every_s` seconds (see `hetpool export --partition`)."""

    out: Path
    every_s: float
    pools: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlertmanagerPlan:
    """Where `hetpool serve` sends its alerts, how often, and the console base URL their links open."""

    url: str
    every_s: float = 60.0
    console_url: str = ""  # default: the console this serve starts
    timeout_s: float = 10.0
    retry_s: float = 2.0  # the first retry after a failed send; doubled each time, at most every_s
    runway_alert_weeks: float = 4.0  # a pool whose stored runway is shorter than this pages (the `runway` section)

    @property
    def hold_s(self) -> float:
        """How long Alertmanager keeps an alert that is not sent again (four runs, as Prometheus does)."""
        return 4 * self.every_s


@dataclass(frozen=True)
class ServeConfig:
    """One deployment."""

    source: str
    database: Path | None
    console: Listener
    health: Listener
    collectors: tuple[Collector, ...]
    feed: FeedListener = FeedListener(False, "127.0.0.1", 9464)
    export: ExportPlan | None = None
    alertmanager: AlertmanagerPlan | None = None
    runway: RunwayPlan | None = None


@dataclass(frozen=True)
class RunwayPlan:
    """The capacity runway `hetpool serve` computes every `every_s` seconds, as `hetpool replay runway` with these
    options (candidate None: that command's default candidate)."""

    every_s: float = 86_400.0
    candidate: Path | None = None
    gate: Path | None = None
    window_days: int = 28
    growth: float | None = None
    horizon_weeks: float = 26.0


_COMMON = ("every", "max_lag", "pool", "profiles_dir")
_FIELDS = {
    "prometheus": ("url",), "scrape": ("url",), "folder": ("path",),
}
_OPTIONAL = {
    "prometheus": (*_COMMON, "since", "chunk", "profiles", "insecure", "timeout", "canonical"),
    "scrape": (*_COMMON, "profile", "node", "canonical"),
    "folder": (*_COMMON, "profile", "node"),
}


def load_serve_config(path: str | Path) -> ServeConfig:
    """Read and validate a serve file; ServeConfigError lists every problem with line and field."""
    return load_serve_text(read_text(path, ServeConfigError), str(path), Path(path).resolve().parent)


def load_serve_text(text: str, source: str = "<serve>", base: Path | None = None) -> ServeConfig:
    """Validate serve YAML text; relative paths are taken from `base`."""
    r = Reader(source)
    here = base or Path.cwd()
    root = r.root(text, "a mapping with 'collectors'", ServeConfigError)
    f = r.mapping(root, "", required=("collectors",), optional=("database", "console", "health", "export", "feed",
                                                                          "alertmanager", "runway"))
    database = r.optional(f, "database", "", lambda n, p: _path(here, r.string(n, p)), None)
    console = _listener(r, f.get("console"), "console", 8501)
    health = _listener(r, f.get("health"), "health", 8502)
    collectors: list[Collector] = []
    names: dict[str, int] = {}
    for path, item in r.items(f.get("collectors"), "collectors"):
        c = _collector(r, item, path, here)
        if c is None:
            continue
        if c.name in names:
            r.fail(item, f"{path}.name", f"duplicate collector name '{c.name}' (also collectors[{names[c.name]}])")
        names[c.name] = len(collectors)
        collectors.append(c)
    if "collectors" in f and not collectors and not r.problems:
        r.fail(f["collectors"], "collectors", "expected at least one collector")
    if console.enabled and health.enabled and (console.address, console.port) == (health.address, health.port):
        r.fail(f.get("health"), "health.port", f"port {health.port} is already the console's")
    feed = _feed(r, f.get("feed"))
    for other, name in ((console, "console"), (health, "health endpoint")):
        if feed.enabled and other.enabled and (feed.address, feed.port) == (other.address, other.port):
            r.fail(f.get("feed"), "feed.port", f"port {feed.port} is already the {name}'s")
    export = None if "export" not in f else _export(r, f["export"], here)
    alerting = None if "alertmanager" not in f else _alertmanager(r, f["alertmanager"], console)
    runway = None if "runway" not in f else _runway(r, f["runway"], here)
    if r.problems:
        raise ServeConfigError(r.problems)
    return ServeConfig(source, database, console, health, tuple(collectors), feed, export, alerting, runway)


def _runway(r: Reader, node: Node, here: Path) -> RunwayPlan:
    """The runway the service computes on a schedule; the alert's threshold is alertmanager.runway_alert_weeks."""
    from replay.exceptions import RunwayError  # here: a serve file without a runway loads no replay
    from replay.runway.growth import parse_growth

    g = r.mapping(node, "runway", required=(), optional=("every", "candidate", "gate", "window", "growth",
                                                         "horizon"))
    every = r.optional(g, "every", "runway", lambda n, p: _duration(r, n, p), 86_400.0)
    candidate = r.optional(g, "candidate", "runway", lambda n, p: _path(here, r.string(n, p)), None)
    gate = r.optional(g, "gate", "runway", lambda n, p: _path(here, r.string(n, p)), None)
    window = r.optional(g, "window", "runway", lambda n, p: _duration(r, n, p), 28 * 86_400.0)
    if window % 86_400:
        r.fail(g["window"], "runway.window", f"expected whole days, like 28d, got {window / 86_400:g} days")
    horizon = r.optional(g, "horizon", "runway", lambda n, p: _duration(r, n, p), 26 * 7 * 86_400.0)
    growth = None
    text = r.optional(g, "growth", "runway", r.string, "auto")
    try:
        growth = parse_growth(text)
    except RunwayError as exc:
        r.fail(g["growth"], "runway.growth", str(exc).replace("--growth ", ""))
    return RunwayPlan(every, candidate, gate, int(window // 86_400), growth, horizon / (7 * 86_400))


_AM_SECRETS = ("token", "username", "user", "password", "bearer_token", "basic_auth")


def _alertmanager(r: Reader, node: Node, console: Listener) -> AlertmanagerPlan | None:
    """Alerts go to Alertmanager when the file has this section; its credentials come from the environment only."""
    secrets = [k for k, _ in node.value if k.value in _AM_SECRETS] if isinstance(node, MappingNode) else []
    if secrets:
        r.fail(secrets[0], f"alertmanager.{secrets[0].value}", "Alertmanager's credentials do not belong in this "
               "file; set HETPOOL_ALERTMANAGER_TOKEN, or HETPOOL_ALERTMANAGER_USER and HETPOOL_ALERTMANAGER_PASSWORD, "
               "in the service's environment")
        return None
    g = r.mapping(node, "alertmanager", required=("url",), optional=("every", "console_url", "timeout",
                                                                     "runway_alert_weeks"))
    if "url" not in g:
        return None
    url = _url(r, g["url"], "alertmanager.url", "Alertmanager's credentials do not belong in the URL; set "
               "HETPOOL_ALERTMANAGER_TOKEN, or HETPOOL_ALERTMANAGER_USER and HETPOOL_ALERTMANAGER_PASSWORD, in the "
               "service's environment")
    every = r.optional(g, "every", "alertmanager", lambda n, p: _duration(r, n, p), 60.0)
    own = f"http://{console.address}:{console.port}" if console.enabled else ""
    base = r.optional(g, "console_url", "alertmanager", lambda n, p: _url(r, n, p), own)
    timeout = r.optional(g, "timeout", "alertmanager", lambda n, p: _duration(r, n, p), 10.0)
    weeks = r.optional(g, "runway_alert_weeks", "alertmanager.runway_alert_weeks",
                       lambda n, p: r.number(n, p, gt=0), 4.0)
    return AlertmanagerPlan(url.rstrip("/"), every, base.rstrip("/"), timeout, runway_alert_weeks=weeks)


def _feed(r: Reader, node: Node | None) -> FeedListener:
    """The feed runs when the file has a `feed` section (unless it says enabled: false)."""
    off = FeedListener(False, "127.0.0.1", 9464)
    if node is None:
        return off
    token = [k for k, _ in node.value if k.value == "token"] if isinstance(node, MappingNode) else []
    if token:
        r.fail(token[0], "feed.token", "the feed's token does not belong in this file; set HETPOOL_FEED_TOKEN in "
                                       "the service's environment")
        return off
    g = r.mapping(node, "feed", required=(), optional=("enabled", "address", "port", "window"))
    return FeedListener(r.optional(g, "enabled", "feed", r.boolean, True),
                        r.optional(g, "address", "feed", r.string, "127.0.0.1"),
                        r.optional(g, "port", "feed", lambda n, p: r.integer(n, p, ge=1, le=65535), 9464),
                        int(1000 * r.optional(g, "window", "feed", lambda n, p: _duration(r, n, p), 300.0)))


def _export(r: Reader, node: Node, here: Path) -> ExportPlan:
    g = r.mapping(node, "export", required=("out",), optional=("every", "pools", "metrics"))
    out = _path(here, r.string(g["out"], "export.out")) if "out" in g else here
    every = r.optional(g, "every", "export", lambda n, p: _duration(r, n, p), 3600.0)
    none: tuple[str, ...] = ()
    pools = r.optional(g, "pools", "export", r.string_list, none)
    metrics = r.optional(g, "metrics", "export", r.string_list, none)
    for i, m in enumerate(metrics):
        if m not in METRICS:
            r.fail(g["metrics"], f"export.metrics[{i}]", f"unknown metric '{m}'; known: {', '.join(sorted(METRICS))}")
    return ExportPlan(out, every, pools, metrics)


def _listener(r: Reader, node: Node | None, path: str, port: int) -> Listener:
    if node is None:
        return Listener(True, "127.0.0.1", port)
    g = r.mapping(node, path, required=(), optional=("enabled", "address", "port"))
    return Listener(r.optional(g, "enabled", path, r.boolean, True),
                    r.optional(g, "address", path, r.string, "127.0.0.1"),
                    r.optional(g, "port", path, lambda n, p: r.integer(n, p, ge=1, le=65535), port))


def _collector(r: Reader, node: Node, path: str, here: Path) -> Collector | None:
    head = r.mapping(node, path, required=("name", "kind"), optional=tuple(
        {k for fields in (*_FIELDS.values(), *_OPTIONAL.values()) for k in fields}))
    if "kind" not in head or "name" not in head:
        return None
    kind = r.choice(head["kind"], f"{path}.kind", tuple(KINDS))
    name = r.text(head["name"], f"{path}.name")
    if kind not in KINDS:
        return None
    allowed = set(_FIELDS[kind]) | set(_OPTIONAL[kind]) | {"name", "kind"}
    for key in head:
        if key not in allowed:
            r.fail(head[key], f"{path}.{key}", f"'{key}' is not a field of a {kind} collector; expected one of: "
                                               f"{', '.join(sorted(allowed))}")
    for key in _FIELDS[kind]:
        if key not in head:
            r.fail(node, f"{path}.{key}", f"missing required field of a {kind} collector")
    if r.problems:
        return None
    canonical = r.optional(head, "canonical", path, r.boolean, False)
    for key in ("profiles", "profiles_dir", "profile", "pool", "node"):
        if canonical and key in head:
            r.fail(head[key], f"{path}.{key}", f"'{key}' does not apply with canonical: true; canonical series "
                                               f"name their pool and node and need no profile")
    if r.problems:
        return None
    every = r.optional(head, "every", path, lambda n, p: _duration(r, n, p), 15.0 if kind != "folder" else 10.0)
    lag = r.optional(head, "max_lag", path, lambda n, p: _duration(r, n, p), None)
    pool = r.optional(head, "pool", path, r.string, None)
    no_dirs: tuple[str, ...] = ()
    dirs = tuple(_path(here, d) for d in r.optional(head, "profiles_dir", path, r.string_list, no_dirs))
    if kind == "prometheus":
        return PrometheusPull(
            name=name, url=_url(r, head["url"], f"{path}.url"), every_s=every, max_lag_s=lag or 4 * every + 30,
            since_ms=int(1000 * r.optional(head, "since", path, lambda n, p: _duration(r, n, p), 3600.0)),
            chunk_ms=int(1000 * r.optional(head, "chunk", path, lambda n, p: _duration(r, n, p), 3600.0)),
            profiles=r.optional(head, "profiles", path, r.string_list, no_dirs), profiles_dirs=dirs, pool=pool,
            insecure=r.optional(head, "insecure", path, r.boolean, False),
            timeout_s=r.optional(head, "timeout", path, lambda n, p: _duration(r, n, p), 30.0), canonical=canonical)
    profile = r.optional(head, "profile", path, r.string, None)
    node_name = r.optional(head, "node", path, r.string, None)
    if kind == "scrape":
        return ScrapeTarget(name=name, url=_url(r, head["url"], f"{path}.url"), every_s=every,
                            max_lag_s=lag or max(30.0, 4 * every), pool=pool, profile=profile, node=node_name,
                            profiles_dirs=dirs, canonical=canonical)
    folder = DropFolder(name=name, path=_path(here, r.string(head["path"], f"{path}.path")), every_s=every, pool=pool,
                        profile=profile, node=node_name, profiles_dirs=dirs)
    return folder if lag is None else dataclasses.replace(folder, max_lag_s=lag)


def _path(here: Path, text: str) -> Path:
    return Path(os.path.normpath(here / text))


def _duration(r: Reader, node: Node, path: str) -> float:
    text = r.text(node, path)
    try:
        return parse_duration_ms(text) / 1000
    except ValueError as exc:
        r.fail(node, path, str(exc))
        return 1.0


_PROM_CREDENTIALS = ("credentials do not belong in the URL; set HETPOOL_PROM_TOKEN, or HETPOOL_PROM_USER and "
                     "HETPOOL_PROM_PASSWORD, in the service's environment")


def _url(r: Reader, node: Node, path: str, credentials: str = _PROM_CREDENTIALS) -> str:
    url = r.string(node, path)
    parsed = urlparse(url)
    if url and (parsed.scheme not in ("http", "https") or not parsed.hostname):
        r.fail(node, path, f"bad URL {url!r}; expected http(s)://host:port/...")
    if parsed.username or parsed.password:
        r.fail(node, path, credentials)
    return url
