-- 0021: the service calls the typed functions; a database must have them
-- before a build that calls them reports ready (docs/schema.md, "How the
-- schema changes").
--
-- leased's readiness gate is the schema version (/readyz answers
-- schema_outdated until the database is at the version the build expects).
-- The typed functions the service now calls, lease.acquire_brief_typed,
-- renew_brief_typed and release_brief_typed (one lease) and
-- renew_many_brief_typed and release_many_brief_typed (the batch routes),
-- are definitions under sql/, which migration 20 did not require: a
-- database migrated before they existed is at version 20 without them, and
-- a build calling them would report ready and then fail every call
-- (undefined_function). This file changes nothing by itself; applying it
-- applies every definition under sql/ in the same transaction
-- (docs/schema.md), so a database at version 21 has them.

SELECT 1;
