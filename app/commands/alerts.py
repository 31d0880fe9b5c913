"""hetpool alerts: the console's status rules on its default window; exit 1 when anything is critical."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import time

from app.commands._base import Context, add_command
from app.exceptions import UsageError
from canonical.timeunits import parse_duration_ms


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the alerts command."""
    p = add_command(sub, "alerts", help="evaluate the status rules on the console's default window (the last 24 "
                                        "hours up to the hour of the newest sample) and print every status that is "
                                        "not ok with its level, scope and reason; exit 1 when one is critical",
                    example="hetpool alerts --rules examples/site-rules.yaml --json\n"
                            "  hetpool alerts --send http://127.0.0.1:9093 --console-url http://127.0.0.1:8501",
                    handler=run, common=common)
    p.add_argument("--rules", metavar="FILE", help="site rules over the shipped defaults (default: $HETPOOL_RULES)")
    p.add_argument("--send", metavar="URL", help="also post every warning and critical status to this Alertmanager's "
                                                 "v2 API, once (credentials from HETPOOL_ALERTMANAGER_TOKEN, or "
                                                 "HETPOOL_ALERTMANAGER_USER and HETPOOL_ALERTMANAGER_PASSWORD)")
    p.add_argument("--hold", default="15m", metavar="DURATION",
                   help="with --send: how long Alertmanager keeps the alerts unless sent again (default: 15m; send "
                        "again more often than this, from cron for example)")
    p.add_argument("--console-url", default="", metavar="URL",
                   help="with --send: the console's base URL, for the link to the Node or Device page in each alert")


def run(ctx: Context) -> int:
    """Read the window's facts in one short read, judge them, print (and send), and exit 1 on anything critical."""
    from app.alertmanager import Alertmanager, AlertmanagerError  # here, not at the top: --help loads no layer
    from app.status_read import judge
    from status.alerts import alerts_of, batch
    from status.rules import load_rules
    from status.verdict import verdict

    rules = load_rules(ctx.args.rules)
    hold_ms = _hold(ctx.args.hold) if ctx.args.send else 0
    judged = judge(ctx.store(), rules)
    w, statuses = judged.window, judged.statuses
    pools = tuple(p.id for p in judged.registry.pools)
    level, sentence = verdict(statuses, pools)
    critical = sum(s.level == "critical" for s in statuses)
    data: dict[str, object] = {
        "window": {"start_ms": w.start_ms, "end_ms": w.end_ms}, "level": level, "verdict": sentence,
        "rules": list(rules.sources), "critical": critical, "warning": sum(s.level == "warning" for s in statuses),
        "statuses": [{**dataclasses.asdict(s), "where": s.where} for s in statuses]}
    lines = [f"status, {_when(w.start_ms)} to {_when(w.end_ms)} UTC: {sentence}"]
    lines += [f"  {s.level.upper():<8} {s.scope:<9} {s.where:<28} {s.reason}" for s in statuses]
    if ctx.args.send:
        alerts = alerts_of(statuses, judged.registry, ctx.args.console_url)
        try:
            client = Alertmanager(ctx.args.send)
            # what Alertmanager accepted, not what was built: a refused or redirected post raises instead
            accepted = client.post_alerts(batch(alerts, {}, int(time.time() * 1000), hold_ms).bodies) if alerts else 0
        except AlertmanagerError as exc:
            raise UsageError(str(exc)) from None
        data["sent"] = {"url": client.url, "alerts": accepted, "hold_s": hold_ms / 1000}
        lines.append(f"sent {accepted} alerts to {client.url}, held for {ctx.args.hold} unless sent again")
    ctx.emit(data, "\n".join(lines))
    return 1 if critical else 0


def _hold(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise UsageError(f"--hold {text!r}: {exc}") from None


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")
