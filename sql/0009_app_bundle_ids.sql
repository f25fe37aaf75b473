-- The bundle or package id of an app per platform (issue 19): the iTunes-lookup feed answers it as
-- `bundleId`, and a lookup that names another bundle id finds no result, as Apple's does.
ALTER TABLE apps ADD COLUMN bundle_ids jsonb NOT NULL DEFAULT '{}'::jsonb;  -- platform → bundle id
