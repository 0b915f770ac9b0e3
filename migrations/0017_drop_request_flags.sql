-- 0017: the request flags no decision reads any more are gone from the
-- schema (docs/sql-api.md, "One behaviour for every caller").
--
-- lease._optimistic and lease._existing read the "optimistic" and
-- "existing" request members, which once chose how lease.acquire, renew
-- and the end of a lease decided. Every caller now gets the same decision
-- and nothing calls either helper; a request that still carries the
-- members is accepted and they are ignored. Their files under sql/lease/
-- are removed with this migration (docs/schema.md: dropping a function is a
-- numbered migration's).

DROP FUNCTION lease._optimistic(jsonb);
DROP FUNCTION lease._existing(jsonb);
