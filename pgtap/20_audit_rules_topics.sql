-- What the service role may write into audit (0016): no administrator
-- event it cannot back, no time of its choosing (backend now()), no
-- principal class of its choosing; every audit reason sanitized the same
-- way whichever path wrote it. And topics the relay could never publish
-- (over 255 characters) are refused by the SQL fenced commit.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(17);

CREATE FUNCTION t.ev(rid text) RETURNS lease.audit_events LANGUAGE sql STABLE
RETURN (SELECT a FROM lease.audit_events a WHERE a.request_id = rid);
CREATE FUNCTION t.rec(e jsonb) RETURNS integer LANGUAGE sql VOLATILE
RETURN lease.record_audit(jsonb_build_array(e));
GRANT EXECUTE ON FUNCTION t.rec(jsonb) TO lease_service;
-- a real worker credential (the digest is of nothing secret)
INSERT INTO lease.credentials (credential_id, principal_id, client_id, tenant_id, program_id,
                               actor_names, capabilities, admin, secret_digest)
VALUES ('key_aaaaaaaaaaaaaaaaaaaaaaaaaa', 'prn_w', 'client-w', 'tenant-main', 'program-a',
        ARRAY['*'], ARRAY['targets:lease'], false, sha256('x'));

SET LOCAL ROLE lease_service;
SELECT throws_ok($$SELECT t.rec('{"event_type":"target_lease_force_release","decision":"allow","result_code":"lease_released",
                                  "principal_id":"adm1","principal_class":"admin","lease_id":"lease_nothing","request_id":"f1"}')$$,
                 '42501', NULL, 'an "allow" force_release of no lease that principal ended is refused');
SELECT throws_ok($$SELECT t.rec('{"event_type":"target_lease_revoke","decision":"allow","result_code":"lease_revoked",
                                  "principal_id":"adm1","lease_id":"lease_nothing","request_id":"f2"}')$$,
                 '42501', NULL, 'an "allow" revoke likewise');
SELECT throws_ok($$SELECT t.rec('{"event_type":"target_lease_recover","decision":"deny","result_code":"x","request_id":"f3"}')$$,
                 '42501', NULL, 'recover events come only from SQL');
SELECT throws_ok($$SELECT t.rec('{"event_type":"credential_revoke","decision":"allow","result_code":"x","request_id":"f4"}')$$,
                 '42501', NULL, 'credential events come only from SQL');
SELECT throws_ok($$SELECT t.rec('{"event_type":"target_lease_quarantine","decision":"error","result_code":"x","request_id":"f5"}')$$,
                 '42501', NULL, 'quarantine events come only from SQL');
RESET ROLE;
SELECT is((SELECT count(*) FROM lease.audit_events WHERE request_id LIKE 'f_'), 0::bigint,
          'nothing of the refused batches was stored');

SET LOCAL ROLE lease_service;
SELECT is(lease.record_audit(jsonb_build_array(
            jsonb_build_object('event_type', 'target_lease_force_release', 'decision', 'deny',
                               'result_code', 'access_denied', 'request_id', 'd1',
                               'principal_id', 'prn_w', 'credential_id', 'key_aaaaaaaaaaaaaaaaaaaaaaaaaa',
                               'principal_class', 'admin',
                               'occurred_at', t.rfc3339(now() - interval '1 hour'),
                               'reason', E'line\r\nbreak \u0085next \u2028sep \u202Eevil'),
            jsonb_build_object('event_type', 'target_lease_acquire', 'decision', 'deny',
                               'result_code', 'access_denied', 'request_id', 'd2',
                               'principal_id', 'adm1', 'credential_id', 'key_unknown',
                               'principal_class', 'admin'))),
          2, 'refusals of administrator calls and other events are recorded');
RESET ROLE;
SELECT is((SELECT e.occurred_at FROM t.ev('d1') e), now(), 'the event time is the backend''s now(), not the one sent');
SELECT is((SELECT e.principal_class FROM t.ev('d1') e), 'worker',
          'the principal class is the credential''s, not the one sent');
SELECT is((SELECT e.principal_class FROM t.ev('d2') e), NULL,
          'a principal without a matching credential gets no class');
SELECT is((SELECT e.reason FROM t.ev('d1') e),
          E'line\uFFFD\uFFFDbreak \uFFFDnext \uFFFDsep \uFFFDevil',
          'CR, LF, U+0085, U+2028 and U+202E of a refused call''s reason are replaced');

-- an accepted force release: its reason is cleaned the same way, and the
-- service may then record the replay of that call
SET LOCAL ROLE lease_service;
SELECT t.acquire('target_fr') AS fr \gset
SELECT is(lease.force_release(t.admin(:'fr'::jsonb, E'stuck \u202Eworker \u2028x', '{"request_id":"fr-1"}')) ->> 'code',
          'lease_released', 'an administrator force-releases a lease');
RESET ROLE;
SELECT is((SELECT e.reason FROM t.ev('fr-1') e), lease._audit_clean(E'stuck \u202Eworker \u2028x'),
          'the accepted call''s audit reason is cleaned exactly like a refused one''s');
SET LOCAL ROLE lease_service;
SELECT is(t.rec(jsonb_build_object('event_type', 'target_lease_force_release', 'decision', 'allow',
                                   'result_code', 'lease_released', 'request_id', 'fr-2',
                                   'principal_id', 'adm1', 'lease_id', :'fr'::jsonb #>> '{lease,lease_id}')),
          1, 'the replay of a force release that principal made is recorded');
SELECT :'fr'::jsonb #>> '{lease,lease_id}' AS frid \gset
SELECT throws_ok(format($f$SELECT t.rec('{"event_type": "target_lease_force_release", "decision": "allow",
                 "result_code": "lease_released", "request_id": "fr-3", "principal_id": "p1",
                 "lease_id": "%s"}')$f$, :'frid'),
                 '42501', NULL, 'but not in the name of another principal');

-- topics ---------------------------------------------------------------------
SELECT t.acquire('target_topic') AS tt \gset
SELECT is(lease.fenced_commit(t.commit_req(:'tt'::jsonb, jsonb_build_array(t.pub(repeat('t', 256))))),
          '{"code": "invalid_lease_request", "field": "writes[0].topic"}'::jsonb,
          'a 256-character topic is refused at commit time, naming the field');
SELECT is(lease.fenced_commit(t.commit_req(:'tt'::jsonb, jsonb_build_array(t.pub('ok'), t.pub(repeat('t', 255))))) ->> 'code',
          'commit_accepted', 'a 255-character topic is accepted');

SELECT * FROM finish();
ROLLBACK;
