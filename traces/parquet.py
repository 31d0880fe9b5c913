"""The project's own Parquet request format (see traces.canonical for the columns)."""

from __future__ import annotations

import io

import polars as pl

from traces.base import Parsed, ParseOptions
from traces.canonical import from_raw
from traces.exceptions import TrafficError


class ParquetFormat:
    """hetpool request Parquet; row numbers (1-based) stand in for lines in rejects."""

    name = "parquet"

    def sniff(self, filename: str, head: bytes) -> bool:
        """Parquet files start with the PAR1 magic."""
        return head[:4] == b"PAR1"

    def parse(self, data: bytes, options: ParseOptions) -> Parsed:
        """Read the table, then validate it like text formats."""
        try:
            table = pl.read_parquet(io.BytesIO(data))
        except Exception as exc:  # polars raises several unrelated types for a corrupt file
            raise TrafficError(f"traffic Parquet: cannot read ({exc})") from None
        raw = table.with_row_index("seq").with_columns(
            pl.col("seq").cast(pl.Int64), (pl.col("seq").cast(pl.Int64) + 1).alias("line"),
            pl.struct(pl.all()).struct.json_encode().alias("record") if table.width else pl.lit(""),
        )
        if "arrival" in raw.columns and raw.schema["arrival"].is_temporal():
            arrival = pl.col("arrival")
            if raw.schema["arrival"] == pl.Datetime or isinstance(raw.schema["arrival"], pl.Datetime):
                tz = getattr(raw.schema["arrival"], "time_zone", None)
                arrival = arrival if tz else arrival.dt.replace_time_zone("UTC")
            raw = raw.with_columns(arrival.dt.epoch("ms").alias("arrival_ms")).drop("arrival")
        return from_raw(raw, options, raw.height, "traffic Parquet")


FORMAT = ParquetFormat()
