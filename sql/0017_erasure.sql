-- Erasure of an install (docs/OPERATIONS.md, "Erasure"): a request is pending until the log no longer holds
-- the install's events (`erased_at`) and every projection generation has taken them out of its figures
-- (`erasure_corrections`); then only the SHA-256 of the install id stays.
CREATE TABLE erasures (
    app_id         text        NOT NULL,
    id             uuid        NOT NULL,
    install_id     uuid,                  -- NULL once done
    install_sha256 bytea       NOT NULL,  -- of the install id's text (lower case, with hyphens)
    requested_at   timestamptz NOT NULL,
    cut_tx         xid8,                  -- the install's events of transactions below this were erased
    erased_at      timestamptz,           -- when the log stopped holding them (the database's clock)
    events         bigint,                -- how many the log held
    done_at        timestamptz,
    PRIMARY KEY (app_id, id)
);
-- One open request per install: a repeated request answers the open one.
CREATE UNIQUE INDEX erasures_open_install ON erasures (app_id, install_id) WHERE done_at IS NULL;
CREATE INDEX erasures_open ON erasures (requested_at) WHERE done_at IS NULL;

-- The erased events, from the log's delete until the erasure is done: what adoption takes out of days
-- whose working state was already pruned. Columns as the feed reads the log.
CREATE TABLE erasure_events (
    app_id      text        NOT NULL,
    erasure_id  uuid        NOT NULL,
    tx_id       xid8        NOT NULL,
    position    bigint      NOT NULL,
    event_id    uuid        NOT NULL,
    occurred_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL,
    type        text        NOT NULL,
    install_id  uuid        NOT NULL,
    platform    text,
    app_version text,
    data        jsonb       NOT NULL,
    -- Whether adoption counted it: false when its day had closed before the feed reached it.
    adoption_counted boolean NOT NULL,
    PRIMARY KEY (app_id, erasure_id, tx_id, position),
    FOREIGN KEY (app_id, erasure_id) REFERENCES erasures (app_id, id) ON DELETE CASCADE
);

-- The projection generations that have taken an erasure's install out of their figures.
CREATE TABLE erasure_corrections (
    app_id       text        NOT NULL,
    erasure_id   uuid        NOT NULL,
    name         text        NOT NULL,
    generation   integer     NOT NULL,
    corrected_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, erasure_id, name, generation),
    FOREIGN KEY (app_id, erasure_id) REFERENCES erasures (app_id, id) ON DELETE CASCADE
);
