"""The row schemas of the contract: canonical samples and their key, rejects, observed versions, error state."""

from __future__ import annotations

import polars as pl

# The normalized feed: exports and the scrape endpoint carry exactly these columns.
SAMPLE_COLUMNS = ("ts", "pool", "node", "device", "metric", "value", "attributes")
SAMPLE_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Int64(), "pool": pl.String(), "node": pl.String(), "device": pl.String(),
    "metric": pl.String(), "value": pl.Float64(), "attributes": pl.String(),
}
# A sample is stored once per natural key; attributes are canonical JSON text, so equal sets compare equal.
KEY = ("ts", "pool", "node", "device", "metric", "attributes")
# Stored beside the feed's columns: whether a series describes its device as a whole (see Canonical.per_device).
DEVICE_WIDE = "device_wide"

# Every record that does not become a sample is kept with its line (null when it has none) and the reason.
REJECT_SCHEMA: dict[str, pl.DataType] = {"line": pl.Int64(), "record": pl.String(), "reason": pl.String()}
RECORD_MAX_CHARS = 500

# One observation of a software version on a node (device '' unless the version is per device).
VERSION_SCHEMA: dict[str, pl.DataType] = {
    "pool": pl.String(), "node": pl.String(), "device": pl.String(), "component": pl.String(),
    "version": pl.String(), "ts": pl.Int64(),
}

# A change point of a stateful error series (a sticky code, an error counter): its new raw value at ts.
STATE_SCHEMA: dict[str, pl.DataType] = {
    "node": pl.String(), "device": pl.String(), "source": pl.String(), "ts": pl.Int64(), "value": pl.Float64(),
}
STATE_KEY = ("node", "device", "source")
