-- The current catalog (DESIGN.md section 4), kept in step with the `app:{id}` events that record every
-- change: each write appends its event, advances the stream head and updates these tables in one
-- transaction, then NOTIFYs `upshift_catalog` so that every instance reloads its check snapshot.
ALTER TABLE apps
    ADD COLUMN update_urls jsonb NOT NULL DEFAULT '{}'::jsonb,  -- platform → store URL
    ADD COLUMN store_ids   jsonb NOT NULL DEFAULT '{}'::jsonb;  -- platform → store id

-- One release per platform per version by version equality: version_key is the canonical spelling
-- (1.2.0 and 1.2 share it), the release itself is stored as written.
CREATE TABLE releases (
    app_id      text    NOT NULL REFERENCES apps (app_id),
    platform    text    NOT NULL,
    version_key text    NOT NULL,
    release     jsonb   NOT NULL,
    revision    integer NOT NULL CHECK (revision > 0),
    PRIMARY KEY (app_id, platform, version_key)
);

CREATE TABLE policies (
    app_id   text    NOT NULL REFERENCES apps (app_id),
    platform text    NOT NULL,
    policy   jsonb   NOT NULL,
    revision integer NOT NULL CHECK (revision > 0),
    PRIMARY KEY (app_id, platform)
);
