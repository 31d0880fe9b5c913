-- runways: each pool's capacity runway as `hetpool replay runway`, the console or `hetpool serve` last computed it
-- (replay/runway): the growth per week with its interval, the first date the pool fails its SLA tolerance with the
-- earliest and latest dates (NULL when it holds through the horizon), and what holding the horizon takes. One row
-- per pool and computation; the console and the runway alert read the newest of each pool.
CREATE TABLE runways (
    computed_ms       BIGINT  NOT NULL,
    pool              VARCHAR NOT NULL,
    today             DATE    NOT NULL,
    horizon_weeks     DOUBLE  NOT NULL,
    tolerance         DOUBLE  NOT NULL,
    candidate         VARCHAR NOT NULL,
    growth_per_week   DOUBLE  NOT NULL,
    growth_low        DOUBLE  NOT NULL,
    growth_high       DOUBLE  NOT NULL,
    breaks_on         DATE,
    breaks_on_low     DATE,
    breaks_on_high    DATE,
    violation_rate_now DOUBLE NOT NULL,
    replicas_to_add   INTEGER,
    added_cost_per_month_usd DOUBLE,
    status            VARCHAR NOT NULL,   -- replay/runway/breaking.STATUSES: breaks, holds, holds_to_cap, ...
    notes             VARCHAR NOT NULL,
    PRIMARY KEY (computed_ms, pool)
);
