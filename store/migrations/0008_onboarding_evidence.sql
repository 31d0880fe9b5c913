-- Onboarding evidence files, stored whole so the tracker, the CLI and the console read them from the database
-- and not from wherever they were on disk. One row per file and version: a checklist item of a pool takes one
-- file per role (`file`, or `baseline` and `candidate` for the regression item) and the newest row of each role
-- counts. `produced_at` is when the evidence was produced (the registry's `at`, else when it was stored).
CREATE SEQUENCE onboarding_evidence_id START 1;

CREATE TABLE onboarding_evidence (
    evidence_id BIGINT PRIMARY KEY DEFAULT nextval('onboarding_evidence_id'),
    pool        VARCHAR NOT NULL,
    item        VARCHAR NOT NULL,
    role        VARCHAR NOT NULL,
    name        VARCHAR NOT NULL,     -- the file as it was given
    sha256      VARCHAR NOT NULL,
    body        VARCHAR NOT NULL,
    produced_at TIMESTAMPTZ NOT NULL,
    stored_at   TIMESTAMPTZ NOT NULL,
    source      VARCHAR NOT NULL      -- 'registry' or 'cli'
);
