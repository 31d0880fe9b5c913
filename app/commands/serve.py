"""hetpool serve --config FILE: the collectors, the console and the health endpoint as one deployment."""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands import _child
from app.commands._base import Context, add_command
from app.commands.console import streamlit_command
from app.exceptions import UsageError

if TYPE_CHECKING:
    from app.serve.config import ServeConfig
    from app.serve.feed import FeedServer
    from store import Store

# The functions import the services and layers they use, so that `hetpool serve --help` loads none of them.

ENV_HEALTH_URL = "HETPOOL_HEALTH_URL"
RESTART_AFTER_S = 5.0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the serve command."""
    p = add_command(sub, "serve", help="run the collectors a YAML file declares, each on its schedule, with the "
                                       "console, a health endpoint and, when the file asks, the lake export on "
                                       "its schedule and the feed; SIGTERM stops it cleanly",
                    example="hetpool serve --config examples/serve.yaml", handler=run, common=common)
    p.add_argument("--config", required=True, metavar="FILE", help="serve YAML (see examples/serve.yaml)")
    p.add_argument("--no-console", action="store_true", help="do not start the console")


def _database(ctx: Context, configured: Path | None) -> Path:
    """--db, then $HETPOOL_DB, then the file's `database`, then ./hetpool.duckdb."""
    from store import ENV_DB

    if getattr(ctx.args, "db", None) or os.environ.get(ENV_DB) or configured is None:
        return ctx.db_path
    return configured


def run(ctx: Context) -> int:
    """Serve until SIGTERM or Ctrl-C; then let runs under way finish, stop the console, and exit 0."""
    from app.alertmanager import ENV_URL as ENV_ALERTMANAGER_URL
    from app.serve.alerting import AlertSender
    from app.serve.config import load_serve_config
    from app.serve.health import HealthServer, health_report
    from app.serve.lake import LakeExport
    from app.serve.runway import RunwaySchedule, stored_runway_alerts
    from collectors.service import Runner
    from store import ENV_DB, Store

    config = load_serve_config(ctx.args.config)
    db = _database(ctx, config.database).resolve()
    store = Store(db, on_wait=lambda m: ctx.note(f"hetpool serve: {m}")).ensure("hetpool serve")

    def log(line: str) -> None:
        ctx.note(f"hetpool serve: {line}")

    runner = Runner(store, config.collectors, log=log)
    export = None
    if config.export is not None:
        export = LakeExport(store, config.export, log=log)
        export.check()
    runway = None if config.runway is None else RunwaySchedule(store, config.runway, log=log)
    am = config.alertmanager
    sender = None if am is None else AlertSender(
        store, am, log=log, more=stored_runway_alerts(store, am.runway_alert_weeks, am.console_url)
        if runway is not None else None)

    def jobs() -> dict[str, dict[str, object]]:
        return {**({"export": export.report()} if export else {}),
                **({"alertmanager": sender.report()} if sender else {}),
                **({"runway": runway.report()} if runway else {})}

    health = None
    if config.health.enabled:
        try:
            health = HealthServer(config.health.address, config.health.port,
                                  lambda: health_report(runner.statuses(), {"database": str(db)}, jobs())).start()
        except OSError as exc:
            raise UsageError(f"cannot listen on {config.health.address}:{config.health.port} for the health "
                             f"endpoint: {exc.strerror}") from None
    feed = _feed(config, store, log)
    console = None
    if config.console.enabled and not ctx.args.no_console:
        _port_free(config.console.address, config.console.port)
    env = {**os.environ, ENV_DB: str(db), **({ENV_HEALTH_URL: f"{health.url}/health"} if health else {}),
           **({ENV_ALERTMANAGER_URL: config.alertmanager.url} if config.alertmanager else {})}
    command = streamlit_command(config.console.port, config.console.address)
    with _child.terminate_on_sigterm(), store.writing("hetpool serve"):
        try:
            if config.console.enabled and not ctx.args.no_console:
                console = _child.start(command, env)
            ctx.note(f"hetpool serve: {len(config.collectors)} collectors on {db}"
                     + (f"; console on http://{config.console.address}:{config.console.port}" if console else "")
                     + (f"; health on {health.url}/health" if health else "")
                     + (f"; feed on {feed.url}/metrics" if feed else ""))
            for c in config.collectors:
                ctx.note(f"  {c.name}: {c.describe()} every {c.every_s:g}s")
            if export is not None:
                ctx.note(f"  export: lake {export.plan.out} every {export.plan.every_s:g}s")
                export.start()
            if runway is not None:
                ctx.note(f"  runway: every {runway.plan.every_s:g}s")
                runway.start()
            if sender is not None:
                ctx.note(f"  alerts: to {sender.client.url} every {sender.plan.every_s:g}s")
                sender.start()
            runner.start()
            while True:
                time.sleep(0.5)
                if console is not None and console.poll() is not None:
                    ctx.note(f"hetpool serve: the console exited with {console.returncode}; restarting it in "
                             f"{RESTART_AFTER_S:g} s")
                    time.sleep(RESTART_AFTER_S)
                    console = _child.start(command, env)
        except KeyboardInterrupt:
            ctx.note("hetpool serve: stopping; runs under way finish or roll back")
        finally:
            clean = runner.stop()
            if export is not None:
                clean = export.stop() and clean
            if sender is not None:
                clean = sender.stop() and clean
            if runway is not None:
                clean = runway.stop() and clean
            if feed is not None:
                feed.stop()
            if console is not None:
                _child.stop(console)
            if health is not None:
                health.stop()
    if not clean:
        print("hetpool serve: a collector or the export did not stop in time; its run rolled back", file=sys.stderr)
    return 0


def _feed(config: ServeConfig, store: Store, log: Callable[[str], None]) -> FeedServer | None:
    """The feed endpoint when the file has one; its token comes from the environment only."""
    from app.serve.feed import ENV_TOKEN, FeedServer, store_reader

    f = config.feed
    if not f.enabled:
        return None
    token = os.environ.get(ENV_TOKEN, "").strip() or None
    try:
        return FeedServer(f.address, f.port, store_reader(store, f.window_ms), token, log=log).start()
    except OSError as exc:
        raise UsageError(f"cannot listen on {f.address}:{f.port} for the feed: {exc.strerror}") from None


def _port_free(address: str, port: int) -> None:
    """Refuse at once when the console's port is taken (another console, often `make demo`'s)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as exc:
            raise UsageError(f"cannot start the console on {address}:{port}: {exc.strerror} (another console?); "
                             "set console.port in the serve file, or pass --no-console") from None
