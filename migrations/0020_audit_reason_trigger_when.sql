-- 0020: the audit reason trigger asks only whether there is a reason
-- (docs/schema.md).
--
-- lease.audit_events' BEFORE INSERT trigger audit_reason_clean (0016) had
-- lease._audit_clean's pattern in its WHEN clause, so that events without
-- a reason would cost nothing. PostgreSQL rebuilds a trigger's WHEN clause
-- from its stored node text in every statement that inserts, and the
-- pattern is stored byte by byte: about 26,000 instructions an insert
-- (callgrind, docs/benchmarks.md), paid by every lease operation although
-- its event has no reason. The clause now asks only whether there is one;
-- the trigger's function (sql/lease/_audit_reason_clean.sql) replaces what
-- lease._audit_clean finds and leaves a clean reason as it was, so what is
-- stored does not change.

DROP TRIGGER audit_reason_clean ON lease.audit_events;

CREATE TRIGGER audit_reason_clean
    BEFORE INSERT ON lease.audit_events
    FOR EACH ROW
    WHEN (NEW.reason IS NOT NULL)
    EXECUTE FUNCTION lease._audit_reason_clean();
