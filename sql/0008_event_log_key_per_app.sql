-- One id, one event per app (DESIGN.md section 5): another app's event may carry the same id, even at the
-- same instant, and is that app's own. event_log's primary key was (event_id, occurred_at), which made
-- such an event look stored already; app_id joins it. event_ids (0007) keeps (app_id, event_id) unique.
ALTER TABLE event_log DROP CONSTRAINT event_log_pkey;
ALTER TABLE event_log ADD PRIMARY KEY (event_id, occurred_at, app_id);
