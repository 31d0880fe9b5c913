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

-- device_hours: per device-hour (device '' for a node's node-wide series), what the fleet views read of it:
-- minutes: its device-minutes with a clock or utilization sample; busy: those at mean utilization >= 0.5
-- (store.fleetrollups.BUSY_UTIL); max_clock: its highest device-minute clock; then, of its device-wide series,
-- sums and counts of utilization, clock and power, memory used and total sums, the hottest temperature, the
-- last health, memory used and memory total readings with their times; last_ts: its newest accelerator
-- sample but error events; seen_ts: its newest accelerator sample.
CREATE TABLE device_hours (
    bucket      BIGINT  NOT NULL,
    pool        VARCHAR NOT NULL,
    node        VARCHAR NOT NULL,
    device      VARCHAR NOT NULL,
    minutes     BIGINT  NOT NULL,
    busy        BIGINT  NOT NULL,
    max_clock   DOUBLE,
    util_sum    DOUBLE,
    util_count  BIGINT,
    clock_sum   DOUBLE,
    clock_count BIGINT,
    power_sum   DOUBLE,
    power_count BIGINT,
    used_sum    DOUBLE,
    total_sum   DOUBLE,
    temp_max    DOUBLE,
    health_last DOUBLE,
    health_ts   BIGINT,
    used_last   DOUBLE,
    used_ts     BIGINT,
    total_last  DOUBLE,
    total_ts    BIGINT,
    last_ts     BIGINT,
    seen_ts     BIGINT  NOT NULL
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
WITH h AS (
    SELECT bucket, pool, node, device,
        sum(sum) FILTER (WHERE metric = 'accelerator.utilization' AND device_wide) AS util_sum,
        sum(count) FILTER (WHERE metric = 'accelerator.utilization' AND device_wide) AS util_count,
        sum(sum) FILTER (WHERE metric = 'accelerator.clock' AND device_wide) AS clock_sum,
        sum(count) FILTER (WHERE metric = 'accelerator.clock' AND device_wide) AS clock_count,
        sum(sum) FILTER (WHERE metric = 'accelerator.power' AND device_wide) AS power_sum,
        sum(count) FILTER (WHERE metric = 'accelerator.power' AND device_wide) AS power_count,
        sum(sum) FILTER (WHERE metric = 'accelerator.memory.used' AND device_wide) AS used_sum,
        sum(sum) FILTER (WHERE metric = 'accelerator.memory.total' AND device_wide) AS total_sum,
        max(max) FILTER (WHERE metric = 'accelerator.temperature' AND device_wide) AS temp_max,
        arg_max(last, last_ts) FILTER (WHERE metric = 'accelerator.health' AND device_wide) AS health_last,
        max(last_ts) FILTER (WHERE metric = 'accelerator.health' AND device_wide) AS health_ts,
        arg_max(last, last_ts) FILTER (WHERE metric = 'accelerator.memory.used' AND device_wide) AS used_last,
        max(last_ts) FILTER (WHERE metric = 'accelerator.memory.used' AND device_wide) AS used_ts,
        arg_max(last, last_ts) FILTER (WHERE metric = 'accelerator.memory.total' AND device_wide) AS total_last,
        max(last_ts) FILTER (WHERE metric = 'accelerator.memory.total' AND device_wide) AS total_ts,
        max(last_ts) FILTER (WHERE metric <> 'accelerator.errors') AS last_ts,
        max(last_ts) AS seen_ts
    FROM rollup_1h WHERE metric LIKE 'accelerator.%' GROUP BY bucket, pool, node, device
), m AS (
    SELECT bucket - bucket % 3600000 AS bucket, pool, node, device, count(*) AS minutes,
        count(*) FILTER (WHERE util >= 0.5) AS busy, max(clock) AS max_clock
    FROM device_minutes GROUP BY ALL
)
SELECT h.bucket, h.pool, h.node, h.device, coalesce(m.minutes, 0), coalesce(m.busy, 0), m.max_clock,
    util_sum, util_count, clock_sum, clock_count, power_sum, power_count, used_sum, total_sum, temp_max,
    health_last, health_ts, used_last, used_ts, total_last, total_ts, last_ts, seen_ts
FROM h LEFT JOIN m USING (bucket, pool, node, device);

INSERT INTO node_1m
SELECT bucket, pool, node, metric, sum(count), sum(sum) FROM rollup_1m
WHERE device <> '' AND device_wide AND metric IN ('accelerator.utilization', 'accelerator.memory.used',
    'accelerator.memory.total', 'accelerator.power', 'accelerator.temperature', 'accelerator.clock')
GROUP BY bucket, pool, node, metric;

INSERT INTO node_1h
SELECT bucket - bucket % 3600000, pool, node, metric, sum(count), sum(sum) FROM node_1m GROUP BY ALL;
