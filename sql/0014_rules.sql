-- Rules (docs/ARCHITECTURE.md, "What the catalog holds"): per app and platform, written as `rule_replaced`
-- and `rule_removed` events on the app's stream, like policies, with this table as their current state.
CREATE TABLE rules (
    app_id   text    NOT NULL REFERENCES apps (app_id),
    platform text    NOT NULL,
    rule_id  text    NOT NULL CHECK (rule_id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    rule     jsonb   NOT NULL,
    revision integer NOT NULL CHECK (revision > 0),
    PRIMARY KEY (app_id, platform, rule_id)
);

-- What the rules' evaluation recorded (docs/ARCHITECTURE.md, "Rules"): what a rule did or would have done
-- (once per change of that action), and each evaluation skipped because a projection lagged or rebuilt.
-- Actions themselves are catalog events; this is the worker's own record.
CREATE TABLE rule_records (
    record_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id      text        NOT NULL REFERENCES apps (app_id),
    platform    text        NOT NULL,
    rule_id     text        NOT NULL,
    recorded_at timestamptz NOT NULL,
    -- acted, would_act, failed, stands_aside, skipped, idle
    outcome     text        NOT NULL,
    -- the release the rule looked at (null for a skip)
    version     text,
    -- halt, raise_minimum, hold, or null when the rule does nothing now
    action      text,
    summary     text        NOT NULL
);
CREATE INDEX rule_records_by_rule ON rule_records (app_id, platform, rule_id, record_id DESC);
