CREATE OR REPLACE FUNCTION lease._call_deadline_t(deadline_at timestamptz, principal_id text,
                                                  request_id text, request_digest text)
RETURNS timestamptz
LANGUAGE sql VOLATILE
RETURN CASE
    WHEN current_setting('transaction_isolation') <> 'serializable'
        THEN lease._isolation_error_ts()
    WHEN NOT coalesce(isfinite(deadline_at), false)
        THEN lease._malformed_ts('deadline_at missing or not RFC 3339')
    WHEN NOT lease._id_text_ok(principal_id)
        THEN lease._malformed_ts('principal missing')
    WHEN NOT (lease._id_text_ok(request_id)
              AND coalesce(length(request_digest) = 64 AND request_digest ~ '^[0-9a-f]+$', false))
        THEN lease._malformed_ts('request_id or request_digest missing')
    ELSE deadline_at END;

COMMENT ON FUNCTION lease._call_deadline_t(timestamp with time zone,text,text,text) IS
    'lease._call_deadline''s checks on a typed mutation''s values (lease._renew_t, lease._end_t): SERIALIZABLE (LS002), a finite deadline, a principal id, a request id and a 64-hex-digit digest (LS003, with the same messages). Returns the deadline. VOLATILE like its raisers, so that it inlines.';

REVOKE ALL ON FUNCTION lease._call_deadline_t(timestamp with time zone,text,text,text) FROM PUBLIC;
