-- Webhooks (docs/OPERATIONS.md, "Webhooks"): an app's subscriptions, and their deliveries, each written in
-- the transaction of the fact it tells (an outbox) and sent by one instance at a time.
CREATE TABLE webhooks (
    app_id          text        NOT NULL REFERENCES apps (app_id),
    id              uuid        NOT NULL,
    url             text        NOT NULL,
    kinds           text[]      NOT NULL,
    secret          text        NOT NULL,  -- signs every delivery; never shown after its creation
    previous_secret text,                  -- signs too until previous_until: a rotation's grace period
    previous_until  timestamptz,
    enabled         boolean     NOT NULL DEFAULT true,
    disabled_reason text,
    failing_since   timestamptz,           -- the first of the failed attempts since the last success
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (app_id, id)
);

CREATE TABLE webhook_deliveries (
    app_id     text        NOT NULL,
    id         uuid        NOT NULL,  -- Upshift-Delivery: the same on every attempt
    webhook_id uuid        NOT NULL,
    kind       text        NOT NULL,
    body       text        NOT NULL,  -- the bytes sent and signed
    created_at timestamptz NOT NULL,
    state      text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts   integer     NOT NULL DEFAULT 0,
    next_at    timestamptz NOT NULL,
    ended_at   timestamptz,
    PRIMARY KEY (app_id, id),
    FOREIGN KEY (app_id, webhook_id) REFERENCES webhooks (app_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (ended_at) WHERE state <> 'pending';
CREATE INDEX webhook_deliveries_of_webhook ON webhook_deliveries (app_id, webhook_id, created_at);

CREATE TABLE webhook_attempts (
    app_id      text        NOT NULL,
    delivery_id uuid        NOT NULL,
    attempt     integer     NOT NULL,
    at          timestamptz NOT NULL,
    duration_ms integer     NOT NULL,
    status      integer,               -- the answer's; NULL when none came (refused, unreachable, timed out)
    error       text,
    PRIMARY KEY (app_id, delivery_id, attempt),
    FOREIGN KEY (app_id, delivery_id) REFERENCES webhook_deliveries (app_id, id) ON DELETE CASCADE
);
