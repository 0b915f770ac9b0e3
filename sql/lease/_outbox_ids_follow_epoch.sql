CREATE OR REPLACE FUNCTION lease._outbox_ids_follow_epoch()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    seq text := pg_get_serial_sequence('lease.outbox', 'outbox_id');
    last bigint;
BEGIN
    EXECUTE format('SELECT last_value FROM %s', seq) INTO last;
    PERFORM setval(seq::regclass, greatest(last, coalesce((SELECT max(o.outbox_id) FROM lease.outbox o), 0))
                        + (NEW.epoch - OLD.epoch) * 1099511627776);
    RETURN NEW;
END
$function$;

COMMENT ON FUNCTION lease._outbox_ids_follow_epoch() IS
    'Message ids are outbox ids, and consumers drop a message id they have seen. A restored database (or a promoted replica that missed commits) hands out outbox ids again that the lost database had already published; epoch recovery must run before it accepts commits (docs/operators.md), so every epoch raise moves the outbox id sequence 2^40 further on, the way it moves the fencing counters.';

REVOKE ALL ON FUNCTION lease._outbox_ids_follow_epoch() FROM PUBLIC;
