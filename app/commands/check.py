"""hetpool check FILE|URL: lint an exporter's output, and see what the profiles make of it, without a database."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands._base import Context, add_command

if TYPE_CHECKING:
    from collectors.outbound import Connector
    from normalizers.coverage import Covered
    from normalizers.lint import Report

# The functions import the layers they use, so that `hetpool check --help` loads none of them.

MAX_BYTES = 256 << 20  # an exporter's answer or a file (decompressed) larger than this is refused, not held
SHOWN = 50             # problems printed per kind (--json lists them all)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add `check`."""
    p = add_command(sub, "check", help="lint an exporter's /metrics output (a file or a live URL) as OpenMetrics "
                                       "or Prometheus text, and show which families the profiles map, ignore or "
                                       "do not know, and which core canonical metrics are missing; exit 0 when "
                                       "valid and complete, 1 when not",
                    example="hetpool check examples/exporters/dcgm-h100-a-01.prom --profile dcgm", handler=run,
                    common=common)
    p.add_argument("source", metavar="FILE|URL", help="an exposition file (.gz is read compressed) or an "
                                                      "http(s) /metrics URL")
    p.add_argument("--profile", help="read every metric with this profile (default: detect per metric name)")
    p.add_argument("--profiles-dir", action="append", default=[], metavar="DIR",
                   help="extra profile YAML files (repeatable); a profile here replaces a shipped one of the "
                        "same name")
    p.add_argument("--strict", action="store_true",
                   help="check the input as OpenMetrics even without a '# EOF' line")


def fetch(url: str, connect: Connector | None = None, timeout: float = 10.0) -> tuple[bytes, str]:
    """GET an exporter's /metrics as hetpool's scrape asks for it; the body and its content type."""
    from collectors.exceptions import CollectorError
    from collectors.outbound import Limits, OutboundError, request
    from collectors.outbound import connect as default_connect
    from collectors.scrape import ACCEPT, check_url

    try:
        with request("GET", check_url(url), headers={"Accept": ACCEPT, "Accept-Encoding": "gzip",
                                                     "User-Agent": "hetpool"},
                     limits=Limits(deadline_s=timeout, max_body_bytes=MAX_BYTES),
                     connect=connect or default_connect) as response:
            if response.status >= 400:
                raise CollectorError(f"{url} answered HTTP {response.status} {response.reason}")
            kind = response.header("Content-Type")
            if "protobuf" in kind:
                raise CollectorError(f"{url} answered with {kind}; hetpool reads the text formats only")
            return response.read(), kind
    except OutboundError as exc:
        raise CollectorError(f"cannot fetch {url}: {exc.why}") from None


def read(source: str, connect: Connector | None = None) -> tuple[bytes, str]:
    """The bytes of a file or URL, and the content type a URL was served with."""
    from collectors.exceptions import CollectorError
    from collectors.files import read_chunks

    if source.startswith(("http://", "https://")):
        return fetch(source, connect)
    body = bytearray()
    for chunk in read_chunks(Path(source)):
        body += chunk
        if len(body) > MAX_BYTES:
            raise CollectorError(f"{source} is larger than {MAX_BYTES >> 20} MiB; check one scrape at a time")
    return bytes(body), ""


def check(source: str, *, profile: str | None = None, profiles_dirs: tuple[str, ...] = (), strict: bool = False,
          connect: Connector | None = None) -> dict[str, Any]:
    """The `--json` report of one source."""
    from normalizers import load_profiles
    from normalizers.coverage import cover
    from normalizers.lint import lint

    profiles = load_profiles(profiles_dirs)
    forced = profiles.get(profile) if profile else None
    data, kind = read(source, connect)
    report = lint(data, openmetrics=True if strict else None, content_type=kind)
    families, missing = cover(report.families, profiles, forced)
    return as_json(source, report, families, missing)


def as_json(source: str, report: Report, families: list[Covered], missing: list[str]) -> dict[str, Any]:
    """{"format", "valid", "errors", "warnings", "families", "missing_core"} and the source."""
    return {"source": source, "format": report.format, "valid": report.valid,
            "errors": [p.as_dict() for p in report.errors], "warnings": [p.as_dict() for p in report.warnings],
            "families": [f.as_dict() for f in families], "missing_core": missing}


def _problems(kind: str, problems: list[dict[str, Any]]) -> list[str]:
    out = []
    for p in problems[:SHOWN]:
        out.append(f"  {kind} line {p['line']} [{p['rule']}]: {p['message']}")
        if p["text"]:
            out.append(f"      {p['text']}")
    if len(problems) > SHOWN:
        out.append(f"  ... {len(problems) - SHOWN} more {kind}s (see --json)")
    return out


def _families(families: list[dict[str, Any]]) -> list[str]:
    """One aligned line per family: name, type, samples, profile, status, and what it becomes (or why not)."""
    rows = []
    for f in families:
        canon = ", ".join(f"{c['metric']} ({c['unit']}" + (", derived" if c.get("derived") else "")
                          + (f", needs {' and '.join(c['missing'])}" if c.get("missing") else "") + ")"
                          for c in f["canonical"])
        rows.append((f["name"], f["type"], f"{f['samples']} samples", f["profile"] or "-", f["status"],
                     canon or f["reason"] or ""))
    widths = [max((len(r[k]) for r in rows), default=0) for k in range(5)]
    return [("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False)) + "  " + r[5]).rstrip()
            for r in rows]


def text(result: dict[str, Any]) -> str:
    """The report for humans."""
    name = "OpenMetrics" if result["format"] == "openmetrics" else "Prometheus text format"
    errors, warnings = result["errors"], result["warnings"]
    verdict = "valid" if result["valid"] else f"invalid, {len(errors)} error(s)"
    lines = [f"{result['source']}: {name}, {verdict}" + (f", {len(warnings)} warning(s)" if warnings else "")]
    lines += _problems("error", errors) + _problems("warning", warnings)
    lines.append(f"families ({len(result['families'])}):")
    lines += _families(result["families"])
    missing = result["missing_core"]
    lines.append(f"missing core metrics: {', '.join(missing)}" if missing else "every core metric is delivered")
    return "\n".join(lines)


def exit_code(result: dict[str, Any]) -> int:
    """0 when valid with every core metric, else 1."""
    return 0 if result["valid"] and not result["missing_core"] else 1


def run(ctx: Context) -> int:
    """Check one file or URL; exit 0 when valid and complete, 1 when not (2 for usage and I/O errors)."""
    a = ctx.args
    result = check(a.source, profile=a.profile, profiles_dirs=tuple(a.profiles_dir), strict=a.strict)
    ctx.emit(result, text(result))
    return exit_code(result)

