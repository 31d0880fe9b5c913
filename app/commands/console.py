"""hetpool console: run the Streamlit console on the database."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.commands import _child
from app.commands._base import Context, add_command
from app.exceptions import UsageError

CONSOLE_MAIN = Path(__file__).resolve().parent.parent / "console" / "main.py"
# streamlit's own command line, started after the console's layers are imported (app/console/launch.py)
CONSOLE_LAUNCH = CONSOLE_MAIN.with_name("launch.py")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the console command."""
    p = add_command(sub, "console", help="serve the Streamlit console on the database",
                    example="hetpool --db demo.duckdb console --port 8501", handler=run, common=common)
    p.add_argument("--port", type=int, default=8501, help="HTTP port (default 8501)")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--secrets", type=Path, metavar="FILE",
                   help="Streamlit secrets file to read instead of .streamlit/secrets.toml ([auth] for login, "
                        "hetpool_roles, hetpool_trusted_header)")


def streamlit_command(port: int, address: str, secrets: Path | None = None) -> list[str]:
    """The streamlit invocation, with telemetry and browser launch off (and a secrets file when given)."""
    return [sys.executable, str(CONSOLE_LAUNCH), "run", str(CONSOLE_MAIN),
            "--server.headless", "true", "--server.port", str(port), "--server.address", address,
            "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
            # an unexpected error shows its type in the page; its message and traceback go to the log only
            "--client.showErrorDetails", "type",
            *(["--secrets.files", str(secrets.resolve())] if secrets else [])]


def run(ctx: Context) -> int:
    """Run streamlit in the foreground until interrupted."""
    from access.policy import beyond_loopback  # here, not at the top: `hetpool console --help` loads no layer
    from store import ENV_DB

    db = ctx.db_path.resolve()
    if not db.exists():
        ctx.note(f"note: {db} does not exist yet; the console will show how to create it")
    secrets = ctx.args.secrets
    if secrets is not None and not secrets.is_file():
        raise UsageError(f"--secrets {str(secrets)!r}: no such file")
    env = {**os.environ, ENV_DB: str(db)}
    ctx.note(f"console on http://{ctx.args.address}:{ctx.args.port} for {db}")
    if beyond_loopback(ctx.args.address):
        ctx.note(f"warning: the console listens on {ctx.args.address}, beyond this machine: without a login "
                 "(Streamlit's [auth] in the secrets, or HETPOOL_TRUSTED_HEADER behind an auth proxy) every visitor "
                 "is a viewer; see docs/deploy.md, Console access")
    return _child.run(streamlit_command(ctx.args.port, ctx.args.address, secrets), env)
