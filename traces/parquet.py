"""The project's own Parquet request format (see traces.canonical for the columns)."""

from __future__ import annotations

import io

import polars as pl

from traces.base import Parsed, ParseOptions
from traces.canonical import OPTIONAL, REQUIRED, from_raw
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
        table = _usable(table)
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


def _usable(table: pl.DataFrame) -> pl.DataFrame:
    """The table with the columns hetpool reads checked: numbers, text or (for `arrival`) times; a binary,
    list or struct column there is a TrafficError naming it. Other columns are ignored, so binary ones are
    dropped before each row is quoted as JSON in its reject."""
    known = {"arrival", "arrival_ms", *REQUIRED, *OPTIONAL}
    for name, dtype in table.schema.items():
        if name in known and not (dtype.is_numeric() or dtype in (pl.String, pl.Null, pl.Boolean) or
                                  (name == "arrival" and dtype.is_temporal()) or
                                  (name == "hash_ids" and isinstance(dtype, pl.List) and dtype.inner.is_integer())):
            expected = "a list of integers" if name == "hash_ids" else "numbers or text"
            raise TrafficError(f"traffic Parquet: column {name!r} is {dtype}; expected {expected}")
    unquotable = [n for n, t in table.schema.items() if n not in known and _binary(t)]
    return table.drop(unquotable) if unquotable else table


def _binary(dtype: pl.DataType) -> bool:
    """Whether a column type holds binary anywhere (a JSON rendering of it fails)."""
    if dtype == pl.Binary:
        return True
    inner = getattr(dtype, "inner", None)
    if inner is not None:
        return _binary(inner)
    fields = getattr(dtype, "fields", None)
    return any(_binary(f.dtype) for f in fields) if fields else False


FORMAT = ParquetFormat()
