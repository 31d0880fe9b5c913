-- Samples of metrics a profile's `ignore` names are known and deliberately not mapped: each run counts them
-- apart from rejects, so that read = stored + rejected + duplicates + ignored. Runs recorded before this
-- migration ignored nothing.
ALTER TABLE ingest_runs ADD COLUMN ignored BIGINT DEFAULT 0;
