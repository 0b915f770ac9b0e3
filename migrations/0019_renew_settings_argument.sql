-- 0019: lease._renew takes the settings its caller read (docs/schema.md).
--
-- A batch renewal (lease._renew_many) read lease._settings, the policy and
-- the namespace guard's quick check, once per item; it now reads it once
-- per batch and hands it to each item's lease._renew, as lease.renew and
-- lease.renew_brief hand it for their one item. The decision is unchanged.
-- The old signature goes (changing a function's arguments is a numbered
-- migration's); the new definition is under sql/lease/_renew.sql.

DROP FUNCTION IF EXISTS lease._renew(jsonb, boolean);
