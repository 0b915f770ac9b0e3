CREATE OR REPLACE FUNCTION lease._outbox_require_claimed(ids bigint[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    me xid := pg_catalog.xid(pg_current_xact_id_if_assigned());
    bad bigint;
BEGIN
    SELECT i INTO bad
      FROM unnest(ids) AS i
      LEFT JOIN lease.outbox o ON o.outbox_id = i
     WHERE i IS NULL OR me IS NULL OR o.outbox_id IS NULL OR NOT (o.xmax = me OR o.xmin = me)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'outbox row % is not claimed by this transaction', bad
            USING ERRCODE = '42501',
                  HINT = 'claim rows with lease.outbox_claim in the same transaction first';
    END IF;
END
$function$;

COMMENT ON FUNCTION lease._outbox_require_claimed(bigint[]) IS
    'Refuses unless this transaction holds every row of ids: locked by its outbox_claim (xmax) or already changed by it after the claim (xmin). The relay role can neither lock nor write outbox rows any other way.';

REVOKE ALL ON FUNCTION lease._outbox_require_claimed(bigint[]) FROM PUBLIC;
