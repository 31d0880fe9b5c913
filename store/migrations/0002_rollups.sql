-- Rollups per (pool, node, device, metric, attributes) and time bucket. sum and count are kept beside avg so
-- that coarser buckets aggregate finer ones exactly; last_ts says which value is the bucket's last.
CREATE TABLE rollup_1m (
    bucket     BIGINT  NOT NULL,   -- bucket start, epoch ms
    pool       VARCHAR NOT NULL,
    node       VARCHAR NOT NULL,
    device     VARCHAR NOT NULL,
    metric     VARCHAR NOT NULL,
    attributes VARCHAR NOT NULL,
    count      BIGINT  NOT NULL,
    sum        DOUBLE  NOT NULL,
    avg        DOUBLE  NOT NULL,
    min        DOUBLE  NOT NULL,
    max        DOUBLE  NOT NULL,
    last       DOUBLE  NOT NULL,
    last_ts    BIGINT  NOT NULL
);

CREATE TABLE rollup_1h (
    bucket     BIGINT  NOT NULL,
    pool       VARCHAR NOT NULL,
    node       VARCHAR NOT NULL,
    device     VARCHAR NOT NULL,
    metric     VARCHAR NOT NULL,
    attributes VARCHAR NOT NULL,
    count      BIGINT  NOT NULL,
    sum        DOUBLE  NOT NULL,
    avg        DOUBLE  NOT NULL,
    min        DOUBLE  NOT NULL,
    max        DOUBLE  NOT NULL,
    last       DOUBLE  NOT NULL,
    last_ts    BIGINT  NOT NULL
);

-- Raw samples older than raw_horizon were pruned; rollups before it are final and never recomputed.
CREATE TABLE retention (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    raw_horizon BIGINT  NOT NULL
);

-- Incremental pulls: everything up to watermark (epoch ms, inclusive) is stored for this source and profile.
CREATE TABLE collector_watermarks (
    url        VARCHAR NOT NULL,
    profile    VARCHAR NOT NULL,
    watermark  BIGINT  NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (url, profile)
);
