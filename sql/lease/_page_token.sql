CREATE OR REPLACE FUNCTION lease._page_token(filter_print text, cursor text[]) RETURNS text
LANGUAGE sql STABLE
RETURN (SELECT payload || '.' || left(encode(sha256(s.page_token_key
                                                     || convert_to(payload, 'UTF8')), 'hex'), 32)
          FROM lease.secrets s,
               LATERAL (SELECT rtrim(translate(replace(encode(convert_to(
                           jsonb_build_object('f', filter_print, 'k', to_jsonb(cursor))::text,
                           'UTF8'), 'base64'), E'\n', ''), '+/', '-_'), '=') AS payload) x);

COMMENT ON FUNCTION lease._page_token(text,text[]) IS
    'Page tokens are opaque and signed by the database: base64url(JSON cursor) "." first 128 bits of SHA-256(key || payload). A token is valid only for the list (kind and filters) that issued it.';

REVOKE ALL ON FUNCTION lease._page_token(text,text[]) FROM PUBLIC;
