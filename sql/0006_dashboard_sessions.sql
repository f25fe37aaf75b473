-- Dashboard sessions (issue 6): a signed-in browser holds a random token in an HttpOnly cookie; only its
-- SHA-256 is stored, with the key it was signed in with. Stored here, a session is valid on every
-- instance, ends when its key is revoked, and ends everywhere at sign-out.
CREATE TABLE dashboard_sessions (
    token_digest text        PRIMARY KEY,
    key_id       uuid        NOT NULL REFERENCES api_keys (key_id) ON DELETE CASCADE,
    csrf_token   text        NOT NULL,  -- sent back in every form that changes state
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);

CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);
