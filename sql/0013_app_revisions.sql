-- An app's revision (issue 38): 1 at creation, advanced by each `PATCH /v1/apps/{app}` (an `app_updated`
-- event on its stream) and sent as `ETag: "n"`, so that an edit made from a stale read is refused with
-- 412, as releases and policies are. Apps created before it read as 1.
ALTER TABLE apps ADD COLUMN revision integer NOT NULL DEFAULT 1 CHECK (revision >= 1);
