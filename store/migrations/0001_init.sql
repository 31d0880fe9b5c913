-- Canonical samples: one row per (ts, pool, node, device, metric, attributes). attributes is canonical JSON
-- (sorted keys, no spaces) so that equal dimension sets compare equal as text.
CREATE TABLE samples (
    ts         BIGINT  NOT NULL,   -- epoch milliseconds, UTC
    pool       VARCHAR NOT NULL,
    node       VARCHAR NOT NULL,
    device     VARCHAR NOT NULL,   -- '' for node- or engine-level series
    metric     VARCHAR NOT NULL,
    value      DOUBLE  NOT NULL,
    attributes VARCHAR NOT NULL DEFAULT '{}'
);

CREATE SEQUENCE ingest_run_id START 1;

CREATE TABLE ingest_runs (
    run_id       BIGINT PRIMARY KEY DEFAULT nextval('ingest_run_id'),
    kind         VARCHAR NOT NULL,   -- file, scrape, prometheus, traffic
    source       VARCHAR NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    window_start BIGINT,             -- epoch ms of the earliest sample, when known
    window_end   BIGINT,
    read         BIGINT NOT NULL DEFAULT 0,
    stored       BIGINT NOT NULL DEFAULT 0,
    rejected     BIGINT NOT NULL DEFAULT 0,
    duplicates   BIGINT NOT NULL DEFAULT 0,
    status       VARCHAR NOT NULL DEFAULT 'ok',
    warnings     VARCHAR NOT NULL DEFAULT '[]'   -- JSON list of strings
);

CREATE TABLE rejects (
    run_id   BIGINT  NOT NULL,
    source   VARCHAR NOT NULL,
    line     BIGINT,             -- 1-based line number, or record index for non-text sources
    record   VARCHAR NOT NULL,   -- the offending text, truncated
    reason   VARCHAR NOT NULL
);

CREATE TABLE versions (
    pool       VARCHAR NOT NULL,
    node       VARCHAR NOT NULL,
    device     VARCHAR NOT NULL,   -- '' when the version is per node
    component  VARCHAR NOT NULL,   -- driver, firmware, runtime, serving engine, ...
    version    VARCHAR NOT NULL,
    first_seen BIGINT  NOT NULL,   -- epoch ms
    last_seen  BIGINT  NOT NULL,
    PRIMARY KEY (pool, node, device, component, version)
);

CREATE TABLE requests (
    trace         VARCHAR NOT NULL,   -- name of the traffic source
    seq           BIGINT  NOT NULL,   -- position in the source; (trace, seq) is the natural key
    arrival_ms    BIGINT  NOT NULL,   -- epoch ms
    in_tokens     INTEGER NOT NULL,
    out_tokens    INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    sla_tier      VARCHAR NOT NULL DEFAULT 'standard',
    model         VARCHAR NOT NULL DEFAULT '',
    obs_pool      VARCHAR,
    obs_ttft_s    DOUBLE,
    obs_e2e_s     DOUBLE,
    outcome       VARCHAR,
    PRIMARY KEY (trace, seq)
);

CREATE SEQUENCE replay_run_id START 1;

CREATE TABLE replay_runs (
    run_id       BIGINT PRIMARY KEY DEFAULT nextval('replay_run_id'),
    created_at   TIMESTAMPTZ NOT NULL,
    candidate    VARCHAR NOT NULL,
    baseline     VARCHAR,
    traffic      VARCHAR NOT NULL,
    seed         BIGINT  NOT NULL,
    summary      VARCHAR NOT NULL,   -- JSON
    verdict      VARCHAR,            -- pass, fail, or NULL when no gate ran
    reasons      VARCHAR NOT NULL DEFAULT '[]'
);

CREATE SEQUENCE registry_snapshot_id START 1;

CREATE TABLE registry_snapshots (
    snapshot_id BIGINT PRIMARY KEY DEFAULT nextval('registry_snapshot_id'),
    loaded_at   TIMESTAMPTZ NOT NULL,
    source      VARCHAR NOT NULL,
    sha256      VARCHAR NOT NULL,
    body        VARCHAR NOT NULL     -- canonical JSON in the registry file schema
);
