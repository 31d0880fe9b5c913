-- pool_1m, pool_1h: per pool, metric and bucket, the sums of node_1m and node_1h over the pool's nodes: the
-- pool series Fleet health charts read a row per pool-minute, not one per node-minute. Derived from the node
-- rollups for the pools a run touched, by store.fleetrollups; this migration fills them for the data before it.
CREATE TABLE pool_1m (
    bucket BIGINT  NOT NULL,
    pool   VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    count  BIGINT  NOT NULL,
    sum    DOUBLE  NOT NULL
);

CREATE TABLE pool_1h (
    bucket BIGINT  NOT NULL,
    pool   VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    count  BIGINT  NOT NULL,
    sum    DOUBLE  NOT NULL
);

INSERT INTO pool_1m SELECT bucket, pool, metric, sum(count), sum(sum) FROM node_1m GROUP BY bucket, pool, metric;

INSERT INTO pool_1h SELECT bucket, pool, metric, sum(count), sum(sum) FROM node_1h GROUP BY bucket, pool, metric;
