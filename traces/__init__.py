"""Request traces: one parser module per format, a registry, and auto-detection (pure: bytes in, rows out)."""

from __future__ import annotations

from pathlib import Path

from canonical.fileread import UnreadableFile, read_bytes
from traces import azure, burstgpt, csvfmt, jsonl, mooncake, parquet
from traces.base import (
    DEFAULT_START,
    DEFAULT_TIER,
    TRAFFIC_SCHEMA,
    Parsed,
    ParseOptions,
    TrafficFormat,
    epoch_ms,
    scale_time,
)
from traces.exceptions import TrafficError, UnknownFormatError

# Detection tries the most specific formats first: the own csv/jsonl formats accept more.
FORMATS: dict[str, TrafficFormat] = {f.name: f for f in (
    azure.FORMAT, burstgpt.FORMAT, mooncake.FORMAT, parquet.FORMAT, jsonl.FORMAT, csvfmt.FORMAT)}
HEAD_BYTES = 4096


def get_format(name: str) -> TrafficFormat:
    """The format registered under name, or an error listing the known ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormatError(f"unknown traffic format '{name}'; known: {', '.join(sorted(FORMATS))}") from None


def detect_format(filename: str, head: bytes) -> TrafficFormat:
    """The first format whose sniff accepts the file, or an error asking for --format."""
    for fmt in FORMATS.values():
        if fmt.sniff(filename, head):
            return fmt
    raise TrafficError(f"{filename}: cannot tell the traffic format; pass --format, one of: "
                       f"{', '.join(sorted(FORMATS))}")


def parse_traffic(data: bytes, filename: str, fmt: str = "auto",
                  options: ParseOptions | None = None) -> tuple[str, Parsed]:
    """Parse traffic bytes (pure: no file access); return (format name, parsed)."""
    chosen = detect_format(filename, data[:HEAD_BYTES]) if fmt == "auto" else get_format(fmt)
    try:
        return chosen.name, chosen.parse(data, options or ParseOptions())
    except TrafficError as exc:
        raise TrafficError(f"{filename}: {exc}") from None


def read_traffic(path: str | Path, fmt: str = "auto",
                 options: ParseOptions | None = None) -> tuple[str, Parsed]:
    """Read and parse a traffic file; I/O trouble becomes a TrafficError naming the file."""
    p = Path(path)
    try:
        data = read_bytes(p, "a traffic file")
    except UnreadableFile as exc:
        raise TrafficError(str(exc)) from None
    return parse_traffic(data, p.name, fmt, options)


__all__ = [
    "DEFAULT_START", "DEFAULT_TIER", "FORMATS", "TRAFFIC_SCHEMA", "ParseOptions", "Parsed",
    "TrafficFormat", "detect_format", "epoch_ms", "get_format", "parse_traffic", "read_traffic", "scale_time",
]
