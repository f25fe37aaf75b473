-- Apps (the catalog's root) and the keys and tokens that act on them (DESIGN.md section 7).
CREATE TABLE apps (
    app_id         text        PRIMARY KEY CHECK (app_id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name           text        NOT NULL,
    default_locale text        NOT NULL DEFAULT 'en',
    created_at     timestamptz NOT NULL
);

CREATE TABLE api_keys (
    key_id        uuid        PRIMARY KEY,
    name          text        NOT NULL,
    scope         text        NOT NULL CHECK (scope IN ('ingest', 'read', 'admin')),
    app_id        text        REFERENCES apps (app_id),  -- null: a read or admin token for every app
    secret_digest text        NOT NULL UNIQUE,           -- hex SHA-256 of the secret; the secret is never stored
    created_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    CHECK (scope <> 'ingest' OR app_id IS NOT NULL)
);
