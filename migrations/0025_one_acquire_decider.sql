-- 0025: one function decides an acquisition (issue 36, "One SQL function
-- per operation"). lease.acquire_brief_typed, what the service calls, is
-- now the decision itself (lease._acquire_t's body), with a last argument
-- `brief boolean DEFAULT true` that lease.acquire sets to false for the
-- whole record; lease._acquire_t is gone.
--
-- This file changes nothing by itself. Applying it applies every
-- definition under sql/ in the same transaction, and then drops each
-- function of schema lease that no definition wrote (docs/schema.md, "How
-- the schema changes"): the old 24-argument lease.acquire_brief_typed goes
-- in the same transaction that creates the 25-argument one, so no call of
-- 24 arguments ever finds two candidates; and a database at version 25
-- has the new one before a build that expects it reports ready.

SELECT 1;
