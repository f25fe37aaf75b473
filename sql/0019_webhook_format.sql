-- A subscription's format (docs/OPERATIONS.md, "Webhooks"): `json`, signed, or `slack`, a Slack incoming
-- webhook's body made from the same delivery when it is sent, unsigned.
ALTER TABLE webhooks ADD COLUMN format text NOT NULL DEFAULT 'json' CHECK (format IN ('json', 'slack'));
