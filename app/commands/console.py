"""hetpool console: run the Streamlit console on the database."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.commands import _child
from app.commands._base import Context, add_command
from store import ENV_DB

CONSOLE_MAIN = Path(__file__).resolve().parent.parent / "console" / "main.py"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the console command."""
    p = add_command(sub, "console", help="serve the Streamlit console on the database",
                    example="hetpool --db demo.duckdb console --port 8501", handler=run, common=common)
    p.add_argument("--port", type=int, default=8501, help="HTTP port (default 8501)")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")


def streamlit_command(port: int, address: str) -> list[str]:
    """The streamlit invocation, with telemetry and browser launch off."""
    return [sys.executable, "-m", "streamlit", "run", str(CONSOLE_MAIN),
            "--server.headless", "true", "--server.port", str(port), "--server.address", address,
            "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal"]


def run(ctx: Context) -> int:
    """Run streamlit in the foreground until interrupted."""
    db = ctx.db_path.resolve()
    if not db.exists():
        ctx.note(f"note: {db} does not exist yet; the console will show how to create it")
    env = {**os.environ, ENV_DB: str(db)}
    ctx.note(f"console on http://{ctx.args.address}:{ctx.args.port} for {db}")
    return _child.run(streamlit_command(ctx.args.port, ctx.args.address), env)
