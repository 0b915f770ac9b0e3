CREATE OR REPLACE FUNCTION lease._notify_lease_ended()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_notify('lease_ended', NEW.lease_id);
    RETURN NULL;
END
$function$;

COMMENT ON FUNCTION lease._notify_lease_ended() IS
    'Trigger on lease.history: NOTIFY lease_ended with the lease id in the transaction that ended the lease, so waiters (the service''s push of ended leases) hear of it when it commits and never of a rolled-back end.';

REVOKE ALL ON FUNCTION lease._notify_lease_ended() FROM PUBLIC;
