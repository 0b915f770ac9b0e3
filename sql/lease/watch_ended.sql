CREATE OR REPLACE FUNCTION lease.watch_ended(ids text[])
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    ended jsonb;
BEGIN
    IF ids IS NULL OR cardinality(ids) > 100000 THEN
        RAISE EXCEPTION 'ids must be an array of at most 100000 lease ids' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(jsonb_agg(x.id ORDER BY x.id), '[]'::jsonb) INTO ended
      FROM (SELECT DISTINCT u.id FROM unnest(ids) u(id)) x
     WHERE NOT EXISTS (
            SELECT 1
              FROM lease.lease_index li
              JOIN lease.locks l ON l.lock_key = li.lock_key
             WHERE li.lease_id = x.id AND l.lease_id = x.id
               AND l.state = 'active' AND lease._effective_expiry(l.session_id, l.expires_at) > now());
    RETURN ended;
END
$function$;

COMMENT ON FUNCTION lease.watch_ended(text[]) IS
    'The listed lease ids that are not active now (ended, expired at backend time, or unknown), as a jsonb array. Read-only, by primary keys only; safe at READ COMMITTED (a terminal state never turns active again, so a lease reported here has ended for good; one reported active may end a moment later and is caught by the next poll).';

REVOKE ALL ON FUNCTION lease.watch_ended(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lease.watch_ended(text[]) TO lease_service;
