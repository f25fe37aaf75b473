-- The alerts of webhooks (docs/OPERATIONS.md, "Webhooks"): the adoption shares a subscription names, and the
-- worker's records of what it told, each written in the transaction of its delivery so that it is told once.
ALTER TABLE webhooks ADD COLUMN thresholds double precision[] NOT NULL DEFAULT '{}';

-- A release's share of active installs reached a subscription's threshold on `day` (never retracted).
CREATE TABLE webhook_crossings (
    app_id      text             NOT NULL,
    webhook_id  uuid             NOT NULL,
    platform    text             NOT NULL,
    version     text             NOT NULL,
    threshold   double precision NOT NULL,
    day         date             NOT NULL,
    recorded_at timestamptz      NOT NULL,
    PRIMARY KEY (app_id, webhook_id, platform, version, threshold),
    FOREIGN KEY (app_id, webhook_id) REFERENCES webhooks (app_id, id) ON DELETE CASCADE
);

-- A health rule's condition held for a release: told once per rule and release, whatever the rule's state.
CREATE TABLE health_regressions (
    app_id      text        NOT NULL,
    platform    text        NOT NULL,
    rule_id     text        NOT NULL,
    version     text        NOT NULL,
    recorded_at timestamptz NOT NULL,
    summary     text        NOT NULL,
    PRIMARY KEY (app_id, platform, rule_id, version)
);
