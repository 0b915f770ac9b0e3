CREATE OR REPLACE FUNCTION lease._audit_clean(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN regexp_replace(t, '[\u0001-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]',
                      E'\uFFFD', 'g');

COMMENT ON FUNCTION lease._audit_clean(text) IS
    'Audit reasons are free text shown to people: C0 and C1 controls (CR, LF, U+0085 ...), DEL, line and paragraph separators (U+2028, U+2029) and bidirectional formatting (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) become U+FFFD, on every path that writes an audit row (accepted calls, refused ones, the service''s batches). The trigger runs only when the WHEN clause finds such a character: events without a reason cost nothing.';

REVOKE ALL ON FUNCTION lease._audit_clean(text) FROM PUBLIC;
