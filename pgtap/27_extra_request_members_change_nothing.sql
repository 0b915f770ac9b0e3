-- Migration 0017 (docs/sql-api.md, "One behaviour for every caller"): the
-- helpers that read the "optimistic" and "existing" request members are
-- gone, and a request that still carries them (a service of an older
-- release) is accepted and decided exactly as one without them.
BEGIN ISOLATION LEVEL SERIALIZABLE;
\ir helpers/fixtures.psql
SELECT plan(6);

SELECT hasnt_function('lease', '_optimistic', ARRAY['jsonb'], 'lease._optimistic is dropped');
SELECT hasnt_function('lease', '_existing', ARRAY['jsonb'], 'lease._existing is dropped');

SET LOCAL ROLE lease_service;
SELECT lease.acquire(t.acq('flags_01', '{"optimistic": true, "existing": true}')) AS a1 \gset
SELECT lease.renew(t.ref(:'a1'::jsonb, '{"optimistic": true}')) AS r1 \gset
SELECT lease.release(t.ref(:'a1'::jsonb, '{"optimistic": true, "existing": true}')) AS l1 \gset
SELECT lease.acquire(t.acq('flags_01', '{"existing": true}')) AS a2 \gset
RESET ROLE;
SELECT is(:'a1'::jsonb ->> 'code', 'lease_acquired', 'an acquire carrying both flags: acquired');
SELECT is(:'r1'::jsonb ->> 'code', 'lease_renewed', 'a renewal carrying "optimistic": renewed');
SELECT is(:'l1'::jsonb ->> 'code', 'lease_released', 'a release carrying both: released');
SELECT is((:'a2'::jsonb #>> '{lease,fencing_token}')::bigint,
          (:'a1'::jsonb #>> '{lease,fencing_token}')::bigint + 1,
          'the next acquisition takes the next token, as without the flags');

SELECT * FROM finish();
ROLLBACK;
