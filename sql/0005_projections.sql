-- Projections (DESIGN.md 5.2 and 6): a registry of projection generations with their checkpoints,
-- and the events a projection could not apply. Each generation's read-model tables are created by
-- the server (their names end in `_g<generation>`), so that a rebuild fills new tables while the
-- active ones keep serving, and the switch is one UPDATE here.
CREATE TABLE projections (
    name            text        NOT NULL,
    generation      integer     NOT NULL CHECK (generation > 0),
    version         integer     NOT NULL,
    state           text        NOT NULL CHECK (state IN ('building', 'active', 'retired')),
    -- The checkpoint: the last (tx_id, position) applied, advanced by compare-and-set with each batch.
    last_tx         xid8        NOT NULL DEFAULT '0',
    last_pos        bigint      NOT NULL DEFAULT 0,
    -- The largest recorded_at applied: it closes adoption days (the fold's horizon).
    max_recorded_at timestamptz,
    events          bigint      NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    activated_at    timestamptz,
    PRIMARY KEY (name, generation)
);
CREATE UNIQUE INDEX projections_one_active ON projections (name) WHERE state = 'active';

CREATE TABLE projection_dead_letters (
    name        text        NOT NULL,
    generation  integer     NOT NULL,
    tx_id       xid8        NOT NULL,
    position    bigint      NOT NULL,
    event_id    uuid        NOT NULL,
    occurred_at timestamptz NOT NULL,
    type        text        NOT NULL,
    error       text        NOT NULL,
    failed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, generation, tx_id, position)
);
