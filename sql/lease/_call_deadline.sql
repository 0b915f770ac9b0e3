CREATE OR REPLACE FUNCTION lease._call_deadline(p jsonb, mutation boolean)
 RETURNS timestamp with time zone
 LANGUAGE sql
RETURN CASE WHEN (current_setting('transaction_isolation'::text) <> 'serializable'::text) THEN lease._isolation_error_ts() WHEN (jsonb_typeof(p) IS DISTINCT FROM 'object'::text) THEN lease._malformed_ts('request is not an object'::text) WHEN (NOT COALESCE(((length((p ->> 'deadline_at'::text)) <= 40) AND ((p ->> 'deadline_at'::text) ~ '^[0-9-]+T[0-9:]+(\.[0-9]+)?(Z|[+-][0-9:]+)$'::text)), false)) THEN lease._malformed_ts('deadline_at missing or not RFC 3339'::text) WHEN (NOT lease._id_ok((p #> '{principal,principal_id}'::text[]))) THEN lease._malformed_ts('principal missing'::text) WHEN (mutation AND (NOT (lease._id_ok((p -> 'request_id'::text)) AND COALESCE(((length((p ->> 'request_digest'::text)) = 64) AND ((p ->> 'request_digest'::text) ~ '^[0-9a-f]+$'::text)), false)))) THEN lease._malformed_ts('request_id or request_digest missing'::text) ELSE ((p ->> 'deadline_at'::text))::timestamp with time zone END;

COMMENT ON FUNCTION lease._call_deadline(jsonb,boolean) IS
    'The deadline of a call, after the checks every call shares: SERIALIZABLE, a request object, an RFC 3339 deadline, a principal and, for mutations, a request id and digest. Raises LS002 or LS003 (a call the service never sends) otherwise. VOLATILE like its raisers, so that it inlines.';

REVOKE ALL ON FUNCTION lease._call_deadline(jsonb,boolean) FROM PUBLIC;
