-- A watermark alone says where stored data ends; covered_from says where that contiguous stretch begins,
-- so re-running an interrupted explicit window resumes at the watermark instead of starting over.
ALTER TABLE collector_watermarks ADD COLUMN covered_from BIGINT;
UPDATE collector_watermarks SET covered_from = watermark WHERE covered_from IS NULL;
