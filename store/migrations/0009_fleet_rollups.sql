-- Rollups the fleet views read instead of scanning every device's metrics minute by minute. Each is derived
-- from rollup_1m (and the hourly ones from the minute ones) for the nodes and buckets a run touched, in the
-- same transaction, by store.fleetrollups; this migration fills them for the data stored before it.
--
-- device_minutes: per device-minute, the mean clock and utilization of its device-wide series (a NULL where
-- the minute has no sample of that metric): the throttling view pairs the two metrics of every device-minute.
CREATE TABLE device_minutes (
    bucket BIGINT  NOT NULL,
    pool   VARCHAR NOT NULL,
    node   VARCHAR NOT NULL,
    device VARCHAR NOT NULL,
    clock  DOUBLE,
    util   DOUBLE
);

-- device_hours: per device-hour, its busy device-minutes (mean utilization >= 0.5, store.fleetrollups.BUSY_UTIL)
-- and its highest device-minute clock: whole hours of the throttling view without reading their minutes.
CREATE TABLE device_hours (
    bucket    BIGINT  NOT NULL,
    pool      VARCHAR NOT NULL,
    node      VARCHAR NOT NULL,
    device    VARCHAR NOT NULL,
    busy      BIGINT  NOT NULL,
    max_clock DOUBLE
);

-- node_1m, node_1h: per node, metric and bucket, the sum and count of its devices' device-wide samples of the
-- gauges Fleet health charts (store.fleetrollups.NODE_METRICS): a pool's series is a sum over its nodes.
CREATE TABLE node_1m (
    bucket BIGINT  NOT NULL,
    pool   VARCHAR NOT NULL,
    node   VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    count  BIGINT  NOT NULL,
    sum    DOUBLE  NOT NULL
);

CREATE TABLE node_1h (
    bucket BIGINT  NOT NULL,
    pool   VARCHAR NOT NULL,
    node   VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    count  BIGINT  NOT NULL,
    sum    DOUBLE  NOT NULL
);

INSERT INTO device_minutes
SELECT bucket, pool, node, device,
    sum(sum) FILTER (WHERE metric = 'accelerator.clock') / sum(count) FILTER (WHERE metric = 'accelerator.clock'),
    sum(sum) FILTER (WHERE metric = 'accelerator.utilization')
        / sum(count) FILTER (WHERE metric = 'accelerator.utilization')
FROM rollup_1m
WHERE device <> '' AND device_wide AND metric IN ('accelerator.clock', 'accelerator.utilization')
GROUP BY bucket, pool, node, device;

INSERT INTO device_hours
SELECT bucket - bucket % 3600000, pool, node, device, count(*) FILTER (WHERE util >= 0.5), max(clock)
FROM device_minutes GROUP BY ALL;

INSERT INTO node_1m
SELECT bucket, pool, node, metric, sum(count), sum(sum) FROM rollup_1m
WHERE device <> '' AND device_wide AND metric IN ('accelerator.utilization', 'accelerator.memory.used',
    'accelerator.memory.total', 'accelerator.power', 'accelerator.temperature', 'accelerator.clock')
GROUP BY bucket, pool, node, metric;

INSERT INTO node_1h
SELECT bucket - bucket % 3600000, pool, node, metric, sum(count), sum(sum) FROM node_1m GROUP BY ALL;
