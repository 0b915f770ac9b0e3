-- N leases (psql -v n=N) held by one owner, each with its renewal request
-- (without request id, digest and deadline: the scripts add fresh ones).
\ir ../../../pgtap/helpers/fixtures.psql
SET default_transaction_isolation = serializable;
SELECT set_config('bench.n', :'n', false);
CREATE TABLE t.held (i int PRIMARY KEY, ref jsonb NOT NULL);
DO $$
DECLARE
    a jsonb;
BEGIN
    FOR i IN 1 .. current_setting('bench.n')::int LOOP
        a := t.acquire('bench_' || i, '{"ttl_ms": 300000}');
        INSERT INTO t.held VALUES (i, t.ref(a) - 'request_id' - 'request_digest' - 'deadline_at');
    END LOOP;
END
$$;
-- a fresh request id, digest and deadline for one renewal
CREATE FUNCTION t.fresh(ref jsonb) RETURNS jsonb LANGUAGE sql VOLATILE
RETURN ref || jsonb_build_object('request_id', 'rb-' || gen_random_uuid(),
                                 'request_digest', t.digest(),
                                 'deadline_at', t.rfc3339(now() + interval '10 seconds'));
