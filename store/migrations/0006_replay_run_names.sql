-- A saved what-if gets a name and a note from whoever saved it, the gate's tolerances it was judged by, and
-- how its traffic was picked (a stored trace and window, or a file), so a later look can say what it was.
ALTER TABLE replay_runs ADD COLUMN name VARCHAR;
ALTER TABLE replay_runs ADD COLUMN note VARCHAR;
ALTER TABLE replay_runs ADD COLUMN gate VARCHAR;          -- JSON of the tolerances, NULL when no gate ran
ALTER TABLE replay_runs ADD COLUMN traffic_spec VARCHAR;  -- JSON: {"kind": "stored", "trace", "start_ms", "end_ms"} or {"kind": "file", "name", "format"}
