-- Change points of stateful error sources (a sticky last-error code, an error counter) per node and device,
-- so that event detection carries across ingest runs: five scrapes of the same sticky error code are one event even when
-- each scrape is its own run. source = the exporter metric name plus the labels that tell its series apart.
CREATE TABLE error_state (
    node   VARCHAR NOT NULL,
    device VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    ts     BIGINT  NOT NULL,   -- epoch ms of the sample where the raw value changed
    value  DOUBLE  NOT NULL,   -- the raw value from then on
    PRIMARY KEY (node, device, source, ts)
);
