-- node_events_1m: per node-minute, severity and vendor code, the severe error events (severity fatal or
-- critical, store.views.markers.SEVERE) summed from rollup_1m: the marks on the console's charts read a row per
-- node-minute that had one, not the day's raw error samples. Derived for the nodes a run touched, by
-- store.fleetrollups; this migration fills it for the data stored before it.
CREATE TABLE node_events_1m (
    bucket   BIGINT  NOT NULL,
    pool     VARCHAR NOT NULL,
    node     VARCHAR NOT NULL,
    severity VARCHAR NOT NULL,
    code     VARCHAR NOT NULL,
    events   DOUBLE  NOT NULL
);

INSERT INTO node_events_1m
SELECT bucket, pool, node, json_extract_string(attributes, '$.severity'),
    coalesce(json_extract_string(attributes, '$.code'), ''), sum(sum)
FROM rollup_1m
WHERE metric = 'accelerator.errors' AND max > 0
    AND json_extract_string(attributes, '$.severity') IN ('fatal', 'critical')
GROUP BY ALL;
