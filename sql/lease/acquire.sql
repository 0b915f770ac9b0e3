CREATE OR REPLACE FUNCTION lease.acquire(p jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    RETURN lease._acquire(p, false);
END
$function$;

COMMENT ON FUNCTION lease.acquire(jsonb) IS
    'acquire-if-free (lease._acquire decides), answered with the whole lease record (docs/sql-api.md, "Result shape"). A new identity is one INSERT ... ON CONFLICT DO NOTHING before anything reads it (the unique indexes decide: concurrent first acquisitions do not fail each other under SERIALIZABLE); an existing free or expired one is one UPDATE with the exact condition; a conflict or a corrupt row is decided after reading the row (LS001 fails closed). A repeated request id is answered from its stored record. Runs the namespace guard first; the idempotency record and audit event commit with the change. Every member of the request other than the documented ones ("brief" included) is ignored.';

REVOKE ALL ON FUNCTION lease.acquire(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.acquire(jsonb) TO lease_service;
