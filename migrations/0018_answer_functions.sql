-- 0018: a short answer is a function of its own, not a request member
-- (docs/sql-api.md, "Result shape").
--
-- The "brief" request member chose how much of the lease record acquire,
-- renew and the end of a lease answered. The service now calls
-- lease.acquire_brief, lease.renew_brief and lease.release_brief (each the
-- same decision as lease.acquire, renew and release: lease._acquire,
-- lease._renew and lease._end, whose last argument says which answer to
-- build), and a request that still carries "brief" is answered whole, the
-- member ignored like any other the functions do not read. The helper that
-- read it goes, and lease._end's old signature (without the answer
-- argument) with it; their new definitions are under sql/lease/
-- (docs/schema.md: dropping a function or changing its arguments is a
-- numbered migration's).

DROP FUNCTION lease._brief(jsonb);
DROP FUNCTION lease._end(jsonb, text, text, text);
