CREATE OR REPLACE FUNCTION lease._call_deadline(p jsonb, mutation boolean) RETURNS timestamptz
LANGUAGE sql VOLATILE
RETURN CASE
    WHEN current_setting('transaction_isolation') <> 'serializable'
        THEN lease._isolation_error_ts()
    WHEN jsonb_typeof(p) IS DISTINCT FROM 'object'
        THEN lease._malformed_ts('request is not an object')
    -- the service always sends RFC 3339; the shape check keeps any other
    -- text (which the cast might read some other way) out
    WHEN NOT coalesce(length(p ->> 'deadline_at') <= 40
                      AND (p ->> 'deadline_at') ~ '^[0-9-]+T[0-9:]+(\.[0-9]+)?(Z|[+-][0-9:]+)$',
                      false)
        THEN lease._malformed_ts('deadline_at missing or not RFC 3339')
    WHEN NOT lease._id_ok(p #> '{principal,principal_id}')
        THEN lease._malformed_ts('principal missing')
    WHEN mutation AND NOT (lease._id_ok(p -> 'request_id')
                           AND coalesce(length(p ->> 'request_digest') = 64
                                        AND (p ->> 'request_digest') ~ '^[0-9a-f]+$', false))
        THEN lease._malformed_ts('request_id or request_digest missing')
    ELSE (p ->> 'deadline_at')::timestamptz END;

COMMENT ON FUNCTION lease._call_deadline(jsonb,boolean) IS
    'The deadline of a call, after the checks every call shares: SERIALIZABLE, a request object, an RFC 3339 deadline, a principal and, for mutations, a request id and digest. Raises LS002 or LS003 (a call the service never sends) otherwise. VOLATILE like its raisers, so that it inlines.';

REVOKE ALL ON FUNCTION lease._call_deadline(jsonb,boolean) FROM PUBLIC;
