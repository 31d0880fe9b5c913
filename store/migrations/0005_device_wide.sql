-- Whether a series describes its device as a whole, as its vendor profile says (`scope: device`, the
-- default) or one part of it (`scope: component`: an engine, a memory pool, a secondary sensor or clock).
-- Device views read only device-wide series; no view names a vendor's attributes. Rows stored before this
-- migration count as device-wide (a database built after it has every profile's scopes).
ALTER TABLE samples ADD COLUMN device_wide BOOLEAN DEFAULT TRUE;
ALTER TABLE rollup_1m ADD COLUMN device_wide BOOLEAN DEFAULT TRUE;
ALTER TABLE rollup_1h ADD COLUMN device_wide BOOLEAN DEFAULT TRUE;
