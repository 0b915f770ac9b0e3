#!lua name=leased_v1
--[[
leased_v1 - the lease decisions of the Valkey/Redis backend, one function per
operation (docs/backends.md). Loaded with FUNCTION LOAD (Redis 7.0+, Valkey
7.2+); the library name carries the version: a change of any function's
meaning is a new library (leased_v2), never an edit of this one in place.

The Postgres functions of sql/lease are the semantics reproduced here
(docs/sql-api.md): the same closed set of codes, request-id idempotency with
a digest, the same identity rules. What differs, and why:

  * A function cannot roll back: every function reads and checks everything
    it needs, and decides, before its first write. The writes that follow
    cannot fail for a reason the checks did not rule out (types are checked
    while reading; a write function is refused whole by the server when it
    is out of memory: deny-oom applies to functions without 'no-writes').
  * Every decision uses the server's TIME, never the caller's clock.
  * Before deciding, every write function checks that it runs on the
    incarnation the namespace was bound to (run_id and master_replid of
    INFO): a restart, a restore or a promotion makes a new incarnation, and
    the namespace is then sealed (lease_backend_unavailable, reason
    namespace_sealed) until an operator rebinds it. The seal is the only
    write such a call makes.
  * Fencing tokens carry an epoch: token = epoch * 2^32 + seq, where seq is
    the identity's durable counter within the epoch (1 .. 2^32 - 1) and
    epoch is 0 .. 2^21 - 1, so every token is below 2^53. Rebinding raises
    the namespace's epoch, so the first token of every identity afterwards is
    greater than any token given in an earlier epoch, whatever the
    data lost with the old incarnation.

Calls: FCALL leased_v1_<op> 1 <namespace key> <request JSON>, or several
acquire/renew/release requests as FCALL leased_v1_combined 1 <namespace key>
<op> <request JSON> ... (combined, below). The namespace
key is "lease:{<ns>}:ns"; every other key of the namespace shares its prefix
and its hash tag. Answers are flat arrays of name/value pairs (RESP integers
for numbers, so tokens stay exact); the "lease" value is such an array too.
Absent values are false in Lua (RESP null). Times are Unix epoch milliseconds.
]]

local LIB_VERSION = 5   -- 2: leased_v1_combined added; 3: packed answers on request (packed_answer);
                        -- 4: idempotency records as strings, a free identity's record its counter
                        -- only (a library before 4 reads neither: load no older one over it);
                        -- 5: a mutation's audit entry packed into one field (MUTATION_FIELDS; a
                        -- library before 5 would export it unexpanded)
local SEQ_SPAN = 4294967296      -- 2^32: seq values per epoch
local SEQ_MAX = SEQ_SPAN - 1     -- the last seq of an epoch
local EPOCH_MAX = 2097151        -- 2^21 - 1: (EPOCH_MAX+1) * 2^32 - 1 = 2^53 - 1
local METADATA_MAX = 2048

local OPCLASSES = {default = true, collect = true, enrich = true, publish = true,
                   maintenance = true}

-- Numbers as decimal text for the server: redis.call would write a Lua
-- number with 14 significant digits, which loses tokens past 10^14.
local function I(n)
    return string.format('%d', n)
end

-- I(n) for the numbers a call writes again and again: its TIME, the
-- namespace's epoch and retentions, the TTLs in use (string.format was 5 %
-- of an acquire's instructions, a third of it these). A number's text
-- never changes, so the memo holds across calls; it starts again when it
-- has grown to MEMO_MAX numbers (each call adds its TIME), so it stays small.
local MEMO_MAX = 256
local memo, memo_n = {}, 0

local function IC(n)
    local s = memo[n]
    if s == nil then
        if memo_n >= MEMO_MAX then memo, memo_n = {}, 0 end
        s = I(n)
        memo[n] = s
        memo_n = memo_n + 1
    end
    return s
end

local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- (one table: the pairs after the code are never nil, so # counts them all)
local function result(code, ...)
    return {'code', code, ...}
end

local function invalid(field, detail)
    if detail then
        return result('invalid_lease_request', 'field', field, 'detail', detail)
    end
    return result('invalid_lease_request', 'field', field)
end

local function unavailable(reason)
    return result('lease_backend_unavailable', 'reason', reason)
end

-- ---------------------------------------------------------------------------
-- Validation: the rules of lease.normalize_component and lease._id_text_ok.

local function is_str(v)
    return type(v) == 'string'
end

-- (an anchored run of the class, not a search for a character outside it:
-- the same answer for a non-empty string, one match instead of one a
-- position; ids and digests are checked on every call)
local function id_ok(v)
    return is_str(v) and #v >= 1 and #v <= 128 and v:find('^[A-Za-z0-9._:-]+$') ~= nil
end

-- (a name already in lower case, as callers send them, is answered as it
-- is: lower() makes a new string a member, five an identity)
local function name_norm(v)     -- tenant, program, actor, workflow
    if not is_str(v) or #v < 1 or #v > 64 then return nil end
    if v:find('^[a-z0-9][a-z0-9_-]*$') then return v end
    local l = v:lower()
    if l:find('^[a-z0-9][a-z0-9_-]*$') then return l end
    return nil
end

local function namespace_norm(v)
    if not is_str(v) or #v < 1 or #v > 64 then return nil end
    local l = v:find('%u') and v:lower() or v
    if l:find('^[a-z0-9][a-z0-9._-]*$') and not l:find('..', 1, true) then return l end
    return nil
end

local function target_norm(v)   -- case-sensitive
    if not is_str(v) or #v < 1 or #v > 128 then return nil end
    if v:find('^[A-Za-z0-9][A-Za-z0-9._:-]*$') and not v:find('..', 1, true) then return v end
    return nil
end

local function opclass_norm(v)
    if v == nil or v == cjson.null then return 'default' end
    if not is_str(v) then return nil end
    if OPCLASSES[v] then return v end
    local l = v:lower()
    if OPCLASSES[l] then return l end
    return nil
end

local IDENTITY_MEMBERS = {
    {'tenant_id', name_norm}, {'program_id', name_norm},
    {'target_namespace', namespace_norm}, {'target_id', target_norm},
    {'actor_name', name_norm}, {'workflow_name', name_norm},
    {'operation_class', opclass_norm},
}

-- The normalised identity and its canonical text, or nil and the field.
local function identity(li)
    if type(li) ~= 'table' then return nil, 'lock_identity' end
    local out = {}
    for k = 1, #IDENTITY_MEMBERS do   -- (numeric loops on the hot paths: ipairs is a C call a step)
        local m = IDENTITY_MEMBERS[k]
        local v = m[2](li[m[1]])
        if v == nil then return nil, 'lock_identity.' .. m[1] end
        out[m[1]] = v
    end
    -- the canonical form of lease._canonical_of: components never contain
    -- quotes or backslashes (the rules above), so this is compact JSON
    out.canonical = '["v1","' .. out.tenant_id .. '","' .. out.program_id .. '","'
        .. out.target_namespace .. '","' .. out.target_id .. '","' .. out.actor_name
        .. '","' .. out.workflow_name .. '","' .. out.operation_class .. '"]'
    return out
end

-- A positive integral JSON number (exact below 2^53), else nil.
local function posint(v)
    if type(v) ~= 'number' or v ~= v or v < 1 or v > 9007199254740991
       or math.floor(v) ~= v then
        return nil
    end
    return v
end

local function digest_ok(v)
    return is_str(v) and #v == 64 and v:find('^[0-9a-f]+$') ~= nil
end

-- The checks every call shares (lease._call_deadline_t): a malformed call is
-- a service bug (LS003 in Postgres), answered as the backend being unable to
-- answer safely. Mutations also need a request id and digest.
local function call_fault(p, mutation)
    if type(p) ~= 'table' then return 'malformed_call' end
    if not posint(p.deadline_at_ms) then return 'malformed_call' end
    if type(p.principal) ~= 'table' or not id_ok(p.principal.principal_id) then
        return 'malformed_call'
    end
    if mutation and (not id_ok(p.request_id) or not digest_ok(p.request_digest)) then
        return 'malformed_call'
    end
    return nil
end

local function decode_request(args)
    local ok, p = pcall(cjson.decode, args[1] or '')
    if not ok or type(p) ~= 'table' then return nil end
    return p
end

local function reason_ok(v)
    if not is_str(v) or #v < 1 or #v > 512 then return false end
    if v:find('%c') then return false end
    if not v:find('%S') then return false end
    return true
end

-- ---------------------------------------------------------------------------
-- Keys. Everything of a namespace shares the prefix (and hash tag) of its
-- namespace key "lease:{ns}:ns".

-- The key names of a namespace, made once per namespace key for the
-- library's life (a library's locals outlive its calls): five closures
-- and a table a call were 1.5 % of an acquire's instructions, counting the
-- collector's share. Kept for at most KEYSPACES_MAX namespace keys, then
-- made again from an empty cache (a server holds one namespace a leased
-- deployment, so the cache never empties in practice).
local KEYSPACES_MAX = 64
local keyspaces, keyspaces_n = {}, 0

local function keyspace_of(nskey)
    local prefix = nskey:sub(1, #nskey - 2)
    return {
        ns = nskey,
        ident = function(canonical) return prefix .. 'id:' .. canonical end,
        hist = function(lease_id) return prefix .. 'h:' .. lease_id end,
        index = function(lease_id) return prefix .. 'l:' .. lease_id end,
        idem = function(op, canonical, principal, request_id)
            return prefix .. 'i:' .. op .. ':' .. principal .. ':' .. request_id .. ':'
                .. canonical
        end,
        -- a fenced document: the canonical tuple ends in '"]' and holds no
        -- other '"', so the document key after it cannot shift the split
        doc = function(canonical, key) return prefix .. 'd:' .. canonical .. ':' .. key end,
        active = prefix .. 'act',
        -- live leases by expiry (score: expires_at), for the expiry sweep
        expiring = prefix .. 'exp',
        audit = prefix .. 'audit',
    }
end

local function keyspace(nskey)
    local ks = keyspaces[nskey]
    if ks then return ks end
    if keyspaces_n >= KEYSPACES_MAX then keyspaces, keyspaces_n = {}, 0 end
    ks = keyspace_of(nskey)
    keyspaces[nskey], keyspaces_n = ks, keyspaces_n + 1
    return ks
end

local function hgetall(key)
    local flat = redis.call('HGETALL', key)
    if #flat == 0 then return nil end
    local h = {}
    for i = 1, #flat, 2 do
        h[flat[i]] = flat[i + 1]
    end
    return h
end

-- ---------------------------------------------------------------------------
-- The namespace and its incarnation.

-- The value of INFO's line "<name>:" (line: "\n<name>:"), the run of
-- characters of class after it, or ''. A plain find, then a match anchored
-- at the value: a pattern search from the text's start would try every
-- position before the line (INFO is over a kilobyte, read on every write).
local function info_value(info, line, class)
    local at = info:find(line, 1, true)
    if not at then return '' end
    return info:match(class, at + #line) or ''
end

-- The server's run_id, read once: it is fixed for the life of the server
-- process, and this library instance lives at most as long as the process
-- (a restart loads the library into a new Lua state; FUNCTION LOAD
-- REPLACE, FLUSH or RESTORE make a new instance, with this unset), so it
-- is what INFO server would answer on every call. role and the replication
-- ids do change within a process (REPLICAOF, a promotion, a new backlog):
-- INFO replication is read on every call.
local own_run_id = nil

local function incarnation()
    if own_run_id == nil then
        own_run_id = info_value(redis.call('INFO', 'server'), '\nrun_id:', '^%x+')
    end
    local repl = redis.call('INFO', 'replication')
    return {
        run_id = own_run_id,
        replid = info_value(repl, '\nmaster_replid:', '^%x+'),
        replid2 = info_value(repl, '\nmaster_replid2:', '^%x+'),
        role = info_value(repl, '\nrole:', '^%a+'),
    }
end

local NS_NUMBERS = {'epoch', 'lid_seq', 'minimum_ttl_ms', 'default_ttl_ms', 'maximum_ttl_ms',
                    'maximum_lifetime_ms', 'idempotency_retention_ms', 'history_retention_ms'}

-- The namespace record's members the functions read (ns.<member>), by
-- HMGET (HGETALL's reply also names every member, and holds the ones no
-- function reads: version, bound_at_ms, sealed_reason, ...). A key that
-- holds none of them is absent, or, if it exists all the same, corrupt (its
-- epoch is missing, below).
local function load_ns(ks)
    local r = redis.call('HMGET', ks.ns, 'epoch', 'lid_seq', 'minimum_ttl_ms', 'default_ttl_ms',
                         'maximum_ttl_ms', 'maximum_lifetime_ms', 'idempotency_retention_ms',
                         'history_retention_ms', 'run_id', 'replid', 'sealed',
                         'audit_retention_ms', 'audit_export_id', 'page_token_key')
    local ns = {
        epoch = r[1] or nil, lid_seq = r[2] or nil, minimum_ttl_ms = r[3] or nil,
        default_ttl_ms = r[4] or nil, maximum_ttl_ms = r[5] or nil,
        maximum_lifetime_ms = r[6] or nil, idempotency_retention_ms = r[7] or nil,
        history_retention_ms = r[8] or nil, run_id = r[9] or nil, replid = r[10] or nil,
        sealed = r[11] or nil, audit_retention_ms = r[12] or nil,
        audit_export_id = r[13] or nil, page_token_key = r[14] or nil,
    }
    if next(ns) == nil and redis.call('EXISTS', ks.ns) == 0 then return nil end
    for k = 1, #NS_NUMBERS do
        local f = NS_NUMBERS[k]
        ns[f] = tonumber(ns[f])
        if ns[f] == nil then return false end
    end
    return ns
end

-- Why this server may not decide for the namespace, or nil. A mismatch
-- seals the namespace (the only write of such a call), before anything
-- else is written. read_only: report without sealing (reads, health).
local function guard(ks, ns, read_only)
    if ns == nil then return 'namespace_unbound' end
    if ns == false then return 'corrupt_namespace' end
    if ns.sealed == '1' then return 'namespace_sealed' end
    -- read once per call: ns is this call's own (load_ns), and nothing can
    -- change the incarnation while a function runs (one at a time), so
    -- the items of a batch or a combined call share the first one's
    local inc = ns.incarnation
    if inc == nil then
        inc = incarnation()
        ns.incarnation = inc
    end
    local why
    if inc.run_id ~= ns.run_id then
        why = 'run_id changed: the server restarted or was replaced'
    elseif inc.role ~= 'master' then
        why = 'the server is a replica'
    elseif inc.replid ~= ns.replid then
        if inc.replid2:find('^0+$') then
            -- The same process, still a primary, with a new replication id
            -- and no previous one: a primary that had no replication
            -- backlog creates one (with a new id) when its first replica
            -- attaches. The dataset is this process's own: the id is
            -- recorded and the call goes on. (A promotion sets
            -- master_replid2; a dataset replaced by a full
            -- synchronization made the process a replica first.)
            if not read_only then
                redis.call('HSET', ks.ns, 'replid', inc.replid)
                ns.replid = inc.replid   -- as the next call would read it
            end
            return nil
        end
        why = 'master_replid changed: the dataset came from another primary'
    end
    if why == nil then return nil end
    if not read_only then
        redis.call('HSET', ks.ns, 'sealed', '1', 'sealed_reason', why,
                   'sealed_at_ms', I(now_ms()))
        ns.sealed = '1'   -- a later item of the same call reads it sealed, as a later call would
    end
    return 'namespace_sealed'
end

-- ---------------------------------------------------------------------------
-- Lease records. The identity record (never deleted, like lease.locks)
-- holds the durable counter and the live lease; terminal leases are history
-- records that expire at the history retention.

local function state_now(rec, t)
    if rec.state ~= 'active' then return rec.state end
    if tonumber(rec.expires_at) > t then return 'active' end
    return 'expired'
end

-- An absent value as RESP null: false, never nil (a nil ends a Lua array).
local function opt(v)
    if v == nil or v == '' then return false end
    return v
end

-- The whole record as the answer's "lease" (docs/sql-api.md "Result shape").
local function lease_pairs(rec, state)
    return {
        'tenant_id', rec.tenant_id, 'program_id', rec.program_id,
        'target_namespace', rec.target_namespace, 'target_id', rec.target_id,
        'actor_name', rec.actor_name, 'workflow_name', rec.workflow_name,
        'operation_class', rec.operation_class,
        'lease_id', rec.lease_id, 'fencing_token', tonumber(rec.token),
        'state', state,
        'acquired_at', tonumber(rec.acquired_at), 'renewed_at', tonumber(rec.renewed_at),
        'expires_at', tonumber(rec.expires_at), 'ended_at', tonumber(rec.ended_at or '') or false,
        'ttl_ms', tonumber(rec.ttl_ms), 'maximum_lifetime_ms', tonumber(rec.maxlife_ms),
        'owner_principal_id', rec.owner, 'owner_client_id', rec.owner_client or '',
        'owner_credential_id', rec.owner_cred or '',
        'service_instance_id', rec.sid, 'execution_id', rec.execution_id,
        'job_id', rec.job_id, 'trace_id', opt(rec.trace_id), 'request_id', rec.request_id,
        'metadata', rec.metadata or '{}', 'end_reason', opt(rec.end_reason),
        'incident_id', opt(rec.incident_id),
    }
end

local LEASE_FIELDS = {'tenant_id', 'program_id', 'target_namespace', 'target_id',
                      'actor_name', 'workflow_name', 'operation_class', 'lease_id', 'token',
                      'owner', 'owner_client', 'owner_cred', 'sid', 'acquired_at',
                      'renewed_at', 'expires_at', 'ttl_ms', 'maxlife_ms', 'execution_id',
                      'job_id', 'trace_id', 'request_id', 'metadata'}

local LEASE_NUMBERS = {'token', 'acquired_at', 'renewed_at', 'expires_at', 'ttl_ms', 'maxlife_ms'}

-- A record is read whole and checked before anything is written: a record
-- whose stored identity differs from the one asked for, or that misses a
-- member, is corrupt (LS001 in Postgres): the call fails closed.
-- The identity record by HMGET of every member this library writes to one
-- (HGETALL's reply is twice as long: every name too), as the table hgetall
-- makes (absent members nil). A key that holds none of them is absent, or,
-- if it exists all the same, a record of nothing this library knows:
-- corrupt, as its missing 'v' makes it below.
local function ident_record(key)
    local r = redis.call('HMGET', key, 'v', 'c', 'epoch', 'seq', 'state', 'hw',
                         'tenant_id', 'program_id', 'target_namespace', 'target_id',
                         'actor_name', 'workflow_name', 'operation_class', 'lease_id',
                         'token', 'owner', 'owner_client', 'owner_cred', 'sid',
                         'acquired_at', 'renewed_at', 'expires_at', 'ttl_ms', 'maxlife_ms',
                         'execution_id', 'job_id', 'trace_id', 'request_id', 'metadata',
                         'ended_at', 'end_reason', 'incident_id')
    local rec = {
        v = r[1] or nil, c = r[2] or nil, epoch = r[3] or nil, seq = r[4] or nil,
        state = r[5] or nil, hw = r[6] or nil, tenant_id = r[7] or nil,
        program_id = r[8] or nil, target_namespace = r[9] or nil, target_id = r[10] or nil,
        actor_name = r[11] or nil, workflow_name = r[12] or nil,
        operation_class = r[13] or nil, lease_id = r[14] or nil, token = r[15] or nil,
        owner = r[16] or nil, owner_client = r[17] or nil, owner_cred = r[18] or nil,
        sid = r[19] or nil, acquired_at = r[20] or nil, renewed_at = r[21] or nil,
        expires_at = r[22] or nil, ttl_ms = r[23] or nil, maxlife_ms = r[24] or nil,
        execution_id = r[25] or nil, job_id = r[26] or nil, trace_id = r[27] or nil,
        request_id = r[28] or nil, metadata = r[29] or nil, ended_at = r[30] or nil,
        end_reason = r[31] or nil, incident_id = r[32] or nil,
    }
    if next(rec) == nil and redis.call('EXISTS', key) == 0 then return nil end
    return rec
end

local function read_ident(ks, i)
    local rec = ident_record(ks.ident(i.canonical))
    if rec == nil then return nil end
    if rec.v ~= '1' or rec.c ~= i.canonical or tonumber(rec.epoch) == nil
       or tonumber(rec.seq) == nil or (rec.state ~= 'active' and rec.state ~= 'free') then
        return false
    end
    -- The stored identity, member by member, is the one asked for (a held
    -- lease's record has them: acquire writes them all): 'c' alone matching
    -- let a record whose target_id was changed answer as a held lease of
    -- another target (race_failclosed on Valkey: lease_conflict, not fail
    -- closed). A free identity's record holds its counter only (end_lease),
    -- named by c; one an earlier build freed still holds the members.
    for k = 1, rec.state == 'free' and rec.tenant_id == nil and 0 or #IDENTITY_MEMBERS do
        local m = IDENTITY_MEMBERS[k][1]
        if rec[m] ~= i[m] then return false end
    end
    if rec.state == 'active' then
        for k = 1, #LEASE_FIELDS do
            if rec[LEASE_FIELDS[k]] == nil then return false end
        end
        for k = 1, #LEASE_NUMBERS do
            if tonumber(rec[LEASE_NUMBERS[k]]) == nil then return false end
        end
    end
    return rec
end

-- acquire's read of the identity record: a free identity's counter by an
-- HMGET of five members (the common case: every identity acquired before
-- is free between its leases, and then no other member is read), else the
-- whole record, checked as read_ident checks it. A free record's c names
-- its identity (an earlier build's free record also holds its last lease's
-- members, which acquire never reads).
local function read_for_acquire(ks, i)
    local key = ks.ident(i.canonical)
    local r = redis.call('HMGET', key, 'state', 'v', 'c', 'epoch', 'seq')
    if r[1] == 'free' then
        if r[2] ~= '1' or r[3] ~= i.canonical or tonumber(r[4]) == nil
           or tonumber(r[5]) == nil then
            return false
        end
        return {state = 'free', v = r[2], c = r[3], epoch = r[4], seq = r[5]}
    end
    if not (r[1] or r[2] or r[3] or r[4] or r[5]) and redis.call('EXISTS', key) == 0 then
        return nil
    end
    return read_ident(ks, i)
end

-- The terminal record of a lease ending now (or at expiry), written to
-- history with its retention; the identity record keeps its counter.
-- Returns rec itself, with ended_at, end_reason and incident_id set (the
-- terminal lease as the answer shows it): no caller reads the live record
-- after ending it, and a copy was a table of 35 members a call.
-- rec is the identity record as stored (every caller read it whole this
-- call and has not changed it): the server moves it to the history key
-- (RENAME), where it is marked terminal and loses the members that are the
-- identity's, not the lease's (v, epoch, seq, hw), so the history record
-- has the members it always had (LEASE_FIELDS, state, ended_at,
-- end_reason, incident_id, c). The identity record is then written again
-- with only those (and c, which names it): a free identity holds its
-- counter and nothing of the lease that ended, for as long as it is kept
-- (forever). Passing the lease's 29 members through the function instead
-- cost a release a tenth of its instructions; a COPY of them (a hashtable:
-- c is over 64 bytes) 7 %.
local COUNTER_MEMBERS = {'v', 'c', 'epoch', 'seq', 'hw'}
local counter_args = {'state', 'free'}   -- (HSET's arguments, one table for every call)

local function end_lease(ks, ns, rec, terminal, ended_at, reason, incident)
    local ended = IC(ended_at)
    local hist = ks.hist(rec.lease_id)
    local ident = ks.ident(rec.c)
    redis.call('RENAME', ident, hist)
    redis.call('HSET', hist, 'state', terminal, 'ended_at', ended, 'end_reason', reason or '',
               'incident_id', incident or '')
    redis.call('HDEL', hist, 'v', 'epoch', 'seq', 'hw')
    redis.call('PEXPIRE', hist, IC(ns.history_retention_ms))
    redis.call('DEL', ks.index(rec.lease_id))
    -- the members the record had (a corrupt one, which rebind and the
    -- expiry step may end, stays as corrupt as it was: nothing is made up)
    local a, n = counter_args, 2
    for k = 1, #COUNTER_MEMBERS do
        local v = rec[COUNTER_MEMBERS[k]]
        if v ~= nil then a[n + 1] = COUNTER_MEMBERS[k]; a[n + 2] = v; n = n + 2 end
    end
    redis.call('HSET', ident, unpack(a, 1, n))
    redis.call('SREM', ks.active, rec.c)
    redis.call('ZREM', ks.expiring, rec.c)
    rec.ended_at = ended
    rec.end_reason = reason or ''
    rec.incident_id = incident or ''
    return rec
end

-- The push of ended leases behind GET /v1/leases/{id}/watch (NOTIFY
-- lease_ended on PostgreSQL, migration 0013): the id of each lease the call
-- ended, PUBLISHed on lease:{ns}:ended as the call's last writes, after
-- every check and every other write. Every end publishes, an ordinary
-- release too (PUBLISH takes no lock that commits would queue on, unlike
-- NOTIFY). Pub/Sub is at-most-once: a subscriber that is not connected at
-- that moment never gets it; leased's batched poll (watch_ended) finds it.
-- So a refused PUBLISH (an ACL user without the channel) is ignored
-- (pcall): the writes before it are made, and the call must answer them.
local function publish_ended(ks, lease_ids)
    local channel = ks.ns:sub(1, #ks.ns - 2) .. 'ended'
    for _, id in ipairs(lease_ids) do redis.pcall('PUBLISH', channel, id) end
end

-- The lease's state now, for a replay's current_state.
local function current_state(ks, canonical, lease_id, t)
    if lease_id == nil or lease_id == '' then return 'expired' end
    local rec = hgetall(ks.ident(canonical))
    if rec and rec.lease_id == lease_id and rec.state == 'active' then
        return state_now(rec, t)
    end
    local h = redis.call('HGET', ks.hist(lease_id), 'state')
    if h then return h end
    return 'expired'
end

-- ---------------------------------------------------------------------------
-- The stored answer of an idempotency record. A stored answer is always
-- result(code, 'lease', lease_pairs(rec, state)) with text pairs after it
-- (an acquire's previous_state), so what is stored is the code, the state,
-- the members of rec that lease_pairs reads, in STORED_FIELDS' order, and
-- the pairs after it, joined by NUL, behind the marker byte \1. A replay builds
-- the record again and calls the same lease_pairs: the same answer, with
-- no second definition of it. cmsgpack.pack of the answer, what this
-- library stored before (a record of an earlier build lives for the
-- idempotency retention, so it is still read) cost 21,000 to 27,000
-- instructions more a mutation (docs/backends.md, "Cost of a function
-- call"); it is still written for a record with a NUL, which this format
-- cannot hold. (A packed answer is an array: its first byte is 0x9X or
-- 0xdc, never \1.)
local STORED_FIELDS = {'tenant_id', 'program_id', 'target_namespace', 'target_id',
                       'actor_name', 'workflow_name', 'operation_class', 'lease_id', 'token',
                       'acquired_at', 'renewed_at', 'expires_at', 'ended_at', 'ttl_ms',
                       'maxlife_ms', 'owner', 'owner_client', 'owner_cred', 'sid',
                       'execution_id', 'job_id', 'trace_id', 'request_id', 'metadata',
                       'end_reason', 'incident_id'}
local STORED_MARK = '\1'

-- One concatenation expression (one pass over its operands, one string:
-- table.concat of the same values measured 2.3 times its cost), the
-- members in STORED_FIELDS' order, which the decoder below reads.
local function stored_answer_encode(answer, rec, state)
    local n = #answer
    -- the members no check of this library keeps free of NUL: the
    -- metadata's text, the principal's client and credential ids (the
    -- rest are ids, names, numbers and reasons checked against a class of
    -- characters, and the pairs after the lease are states)
    local free = (rec.metadata or '') .. (rec.owner_client or '') .. (rec.owner_cred or '')
    if free:find('\0', 1, true) then
        if answer[4] == false then answer[4] = lease_pairs(rec, state) end
        return cmsgpack.pack(answer)
    end
    local s = STORED_MARK .. answer[2] .. '\0' .. state
        .. '\0' .. (rec.tenant_id or '') .. '\0' .. (rec.program_id or '')
        .. '\0' .. (rec.target_namespace or '') .. '\0' .. (rec.target_id or '')
        .. '\0' .. (rec.actor_name or '') .. '\0' .. (rec.workflow_name or '')
        .. '\0' .. (rec.operation_class or '') .. '\0' .. (rec.lease_id or '')
        .. '\0' .. (rec.token or '') .. '\0' .. (rec.acquired_at or '')
        .. '\0' .. (rec.renewed_at or '') .. '\0' .. (rec.expires_at or '')
        .. '\0' .. (rec.ended_at or '') .. '\0' .. (rec.ttl_ms or '')
        .. '\0' .. (rec.maxlife_ms or '') .. '\0' .. (rec.owner or '')
        .. '\0' .. (rec.owner_client or '') .. '\0' .. (rec.owner_cred or '')
        .. '\0' .. (rec.sid or '') .. '\0' .. (rec.execution_id or '')
        .. '\0' .. (rec.job_id or '') .. '\0' .. (rec.trace_id or '')
        .. '\0' .. (rec.request_id or '') .. '\0' .. (rec.metadata or '')
        .. '\0' .. (rec.end_reason or '') .. '\0' .. (rec.incident_id or '')
    for k = 5, n do s = s .. '\0' .. answer[k] end
    return s
end

local function stored_answer_decode(stored)
    if stored:byte(1) ~= 1 then return cmsgpack.unpack(stored) end
    local v, n = {}, 0
    for part in (stored:sub(2) .. '\0'):gmatch('([^%z]*)%z') do
        n = n + 1; v[n] = part
    end
    local rec = {}
    for k = 1, #STORED_FIELDS do rec[STORED_FIELDS[k]] = v[k + 2] end
    local answer = result(v[1], 'lease', lease_pairs(rec, v[2]))
    for k = #STORED_FIELDS + 3, n do answer[#answer + 1] = v[k] end
    return answer
end

-- A lease mutation's answer to a caller that asked for packed answers
-- ("packed_answer": true, what leased's adapter sends): the stored answer's
-- text (code, state, the record's members, the pairs after them; see
-- STORED_FIELDS) and the pairs the table form adds after it, as one string
-- instead of a nested array of 60 values. The same answer: the adapter
-- decodes either form (valkey_codec.c); the server's conversion of the
-- table to its protocol, and the adapter's parse of it, were 7 % of an
-- acquire's instructions here (docs/backends.md, "Packed answers").
local function packed_answer(stored, replayed, current)
    return stored .. '\0replayed\0' .. replayed .. '\0current_state\0' .. current
end

-- ---------------------------------------------------------------------------
-- Idempotency: keyed by operation, owner principal, request id and identity.
-- Same digest: the stored answer, replayed; another digest:
-- idempotency_conflict. Only state-changing answers are stored.
--
-- The record is one string with its retention (SET ... PX): the request's
-- digest (64 hex digits), the lease id, NUL, the stored answer. One write
-- instead of a hash's HSET and PEXPIRE, and one allocation instead of a
-- hashtable's (the stored answer is over 64 bytes, so the hash was never a
-- listpack). A record of an earlier build is a hash of d, r and lid; it is
-- still read (GET answers it WRONGTYPE) until its retention ends.

local DIGEST_LEN = 64

-- The record at key as digest, lease id, stored answer; nil when there is
-- none, false when it is not a record (the call fails closed).
local function idem_record(key)
    local raw = redis.pcall('GET', key)
    if raw == false then return nil end
    if type(raw) == 'string' then
        local nul = raw:find('\0', DIGEST_LEN + 1, true)
        if not nul then return false end
        return raw:sub(1, DIGEST_LEN), raw:sub(DIGEST_LEN + 1, nul - 1), raw:sub(nul + 1)
    end
    local h = redis.call('HMGET', key, 'd', 'lid', 'r')
    if not h[1] then return nil end
    return h[1], h[2], h[3]
end

local function replay(ks, op, i, p, t)
    local key = ks.idem(op, i.canonical, p.principal.principal_id, p.request_id)
    local digest, lid, stored = idem_record(key)
    if digest == nil then return nil end
    if digest == false then return unavailable('corrupt_record') end
    if digest ~= p.request_digest then return result('idempotency_conflict') end
    local now = current_state(ks, i.canonical, lid, t)
    if p.packed_answer == true and stored:byte(1) == 1 then
        return packed_answer(stored, '1', now)
    end
    local r = stored_answer_decode(stored)
    r[#r + 1] = 'replayed'; r[#r + 1] = 1
    r[#r + 1] = 'current_state'; r[#r + 1] = now
    return r
end

-- ---------------------------------------------------------------------------
-- Audit events: one Stream per namespace, lease:{ns}:audit, one entry per
-- event (fields: docs/backends.md "Audit events"). A mutation that changes
-- state appends its event in the same function call as its writes (as
-- PostgreSQL audits inside the mutation's transaction); the service appends
-- the events of everything else (refusals, reads) through record_audit.
-- Each append trims entries older than the audit retention (MINID, entry
-- ids being the server's ms clock), but never one an audit export has not
-- taken yet: once an export has acknowledged an entry (audit_ack), the
-- namespace's export cursor (audit_export_id) bounds the trimming too.

local AUDIT_RETENTION_DEFAULT = 7776000000   -- 90 days, lease.policy's default
local AUDIT_BATCH_MAX = 1000

-- A Stream entry id "ms-seq" as {ms, seq}, or nil (15 digits each at most:
-- exact as Lua numbers).
local function stream_id(v)
    if not is_str(v) then return nil end
    local ms, seq = v:match('^(%d+)%-(%d+)$')
    if not ms or #ms > 15 or #seq > 15 then return nil end
    return {tonumber(ms), tonumber(seq)}
end

local function stream_id_less(a, b)
    return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end

-- The MINID of a trim: entries older than the retention go, unless the
-- export cursor is older still; then only the entries before it (the entry
-- at the cursor itself is kept: taken already, one entry of slack).
local function audit_minid(ns, t)
    -- the same for every item of a call (ns is the call's own)
    if type(ns) == 'table' and ns.minid_at == t then return ns.minid end
    local keep = (type(ns) == 'table' and tonumber(ns.audit_retention_ms))
                 or AUDIT_RETENTION_DEFAULT
    local ms = math.max(0, t - keep)
    local cursor = type(ns) == 'table' and ns.audit_export_id and stream_id(ns.audit_export_id)
    local minid
    if cursor and stream_id_less(cursor, {ms, 0}) then
        minid = I(cursor[1]) .. '-' .. I(cursor[2])
    else
        minid = I(ms) .. '-0'
    end
    if type(ns) == 'table' then ns.minid_at, ns.minid = t, minid end
    return minid
end

-- fields: name/value pairs; empty values are left out. A value may be nil
-- (an absent member): the pairs are walked to n, or to table.maxn, since #
-- stops at any nil of a table with holes and would drop every pair after it.
-- The pairs kept are moved to the front of fields itself (no second table):
-- fields is the caller's own, never read again.
local function audit_append(ks, ns, t, fields, n)
    local m, null = 0, cjson.null
    for k = 1, n or table.maxn(fields), 2 do
        local v = fields[k + 1]
        if v ~= nil and v ~= false and v ~= '' and v ~= null then
            fields[m + 1] = fields[k]
            fields[m + 2] = type(v) == 'number' and I(v) or v
            m = m + 2
        end
    end
    -- exact trimming: each call removes the few entries that aged out since
    -- the previous one (approximate '~' trimming would keep whole nodes, up
    -- to 100 entries, past the retention)
    redis.call('XADD', ks.audit, 'MINID', audit_minid(ns, t), '*', unpack(fields, 1, m))
end

-- A mutation's entry, packed (docs/backends.md "Audit events"): its values
-- in MUTATION_FIELDS' order, joined by NUL ('' for a member it does not
-- have), as the one field 'm'. Appending every member as a field of its
-- own made the server convert and copy 60 arguments, then write each to
-- the append-only file: a tenth of a whole acquire's or release's
-- instructions in the server (tests/valkey/bench/fcall_cost --callgrind
-- --whole --aof). Values only, no names: a Stream stores the names of an
-- entry whose fields are its first entry's once, so names in the value
-- would have made every entry larger in memory. The other events (the
-- service's, a commit's, a rebind's, a credential's: audit_append) keep
-- one field a pair, as every entry did before library version 5; so does
-- a mutation's entry with a NUL in a value (an unchecked principal id),
-- which the packed form cannot hold. audit_fields reads every form.
local MUTATION_FIELDS = {'event_type', 'occurred_at_ms', 'code', 'decision', 'backend_health',
                         'source', 'principal_id', 'client_id', 'credential_id', 'request_id',
                         'correlation_id', 'trace_id', 'priority', 'tenant_id', 'program_id',
                         'target_namespace', 'target_id', 'actor_name', 'workflow_name',
                         'operation_class', 'lease_id', 'fencing_token', 'previous_state',
                         'resulting_state', 'service_instance_id', 'execution_id', 'job_id',
                         'requested_ttl_ms', 'effective_ttl_ms', 'reason', 'incident_id'}

-- An entry's fields as name/value pairs, whichever form it is stored in.
local function audit_fields(f)
    if #f ~= 2 or f[1] ~= 'm' then return f end
    local out, n, k = {}, 0, 0
    for v in (f[2] .. '\0'):gmatch('([^%z]*)%z') do
        k = k + 1
        if v ~= '' and MUTATION_FIELDS[k] then
            out[n + 1] = MUTATION_FIELDS[k]; out[n + 2] = v
            n = n + 2
        end
    end
    return out
end

local EVENT_TYPES = {acquire = 'target_lease_acquire', renew = 'target_lease_renew',
                     release = 'target_lease_release',
                     force_release = 'target_lease_force_release',
                     revoke = 'target_lease_revoke'}

local function str_or_nil(v)
    if is_str(v) then return v end
    return nil
end

-- The event of a mutation that changed state, as lease._evidence_t writes
-- it: the owner's service instance, execution and job from the lease (an
-- administrator's request carries none), the TTL it has
-- (effective_ttl_ms), the state before (an acquire's previous_state;
-- otherwise the active lease it renewed or ended) and after, high priority
-- for an administrator's end. rec is the lease record the answer shows
-- (lease_pairs(rec, state)): its members are read from the record itself,
-- not from the answer's pairs.
local ADMIN_OPS = {force_release = true, revoke = true}

-- v as a value of a mutation's entry: itself when a string, else '' (no
-- member); audit_nul is set when it holds a NUL.
local audit_nul = false

local function entry_value(v)
    if type(v) ~= 'string' then return '' end
    if v:find('\0', 1, true) then audit_nul = true end
    return v
end

-- The same members audit_append would make of the event's pairs (empty
-- ones left out), in MUTATION_FIELDS' order: this runs on every acquire,
-- renewal and end, and the table of pairs, its compaction and a call a
-- member cost a fifth of an acquire's instructions (tests/valkey/bench/
-- fcall_cost --callgrind). (audit_values: one table for every call, no
-- table of 31 to grow and collect a mutation)
local audit_values = {}

local function audit_mutation(ks, ns, t, op, i, p, code, rec, state, previous)
    local pr = p.principal
    local v = audit_values
    audit_nul = false
    v[1] = EVENT_TYPES[op]; v[2] = IC(t); v[3] = code; v[4] = 'allow'; v[5] = 'ok'
    v[6] = 'function'
    v[7] = entry_value(pr.principal_id); v[8] = entry_value(pr.client_id)
    v[9] = entry_value(pr.credential_id); v[10] = entry_value(p.request_id)
    v[11] = entry_value(p.correlation_id)
    -- the request's trace id when it names one (even empty), else the lease's
    v[12] = entry_value(is_str(p.trace_id) and p.trace_id or rec.trace_id)
    v[13] = ADMIN_OPS[op] and 'high' or 'normal'
    v[14] = i.tenant_id; v[15] = i.program_id; v[16] = i.target_namespace
    v[17] = i.target_id; v[18] = i.actor_name; v[19] = i.workflow_name
    v[20] = i.operation_class
    v[21] = entry_value(rec.lease_id)
    local token = tonumber(rec.token)
    v[22] = token and I(token) or ''
    v[23] = entry_value(previous); v[24] = entry_value(state)
    -- the lease's own (a string, even empty), else the request's
    v[25] = entry_value(is_str(rec.sid) and rec.sid or p.service_instance_id)
    v[26] = entry_value(is_str(rec.execution_id) and rec.execution_id or p.execution_id)
    v[27] = entry_value(is_str(rec.job_id) and rec.job_id or p.job_id)
    v[28] = type(p.ttl_ms) == 'number' and I(p.ttl_ms) or ''
    local ttl = tonumber(rec.ttl_ms)
    v[29] = ttl and IC(ttl) or ''
    v[30] = entry_value(p.reason); v[31] = entry_value(p.incident_id)
    local minid = audit_minid(ns, t)
    if not audit_nul then
        redis.call('XADD', ks.audit, 'MINID', minid, '*', 'm', table.concat(v, '\0', 1, 31))
        return
    end
    local a, n = {}, 0
    for k = 1, 31 do
        if v[k] ~= '' then a[n + 1] = MUTATION_FIELDS[k]; a[n + 2] = v[k]; n = n + 2 end
    end
    redis.call('XADD', ks.audit, 'MINID', minid, '*', unpack(a, 1, n))
end

-- The answer stored under the request id (its retention), then marked as
-- not replayed. With rec, answer is result(code, 'lease', pairs, name,
-- text, ...), as a lease mutation answers, its pairs false until needed:
-- lease_pairs(rec, state) is made here only for an answer given as the
-- table (a packed answer is the stored text, which is made from rec: the
-- 54-value table a mutation did not use was 4 % of an acquire's
-- instructions); without rec (a commit's answer), it is stored packed.
-- Returns the stored text when the caller asked for packed answers and it
-- is one (else nil, answer complete).
local function store_answer(ks, ns, op, i, p, answer, lease_id, rec, state)
    local key = ks.idem(op, i.canonical, p.principal.principal_id, p.request_id)
    local stored = rec and stored_answer_encode(answer, rec, state) or cmsgpack.pack(answer)
    redis.call('SET', key, p.request_digest .. lease_id .. '\0' .. stored, 'PX',
               IC(ns.idempotency_retention_ms))
    answer[#answer + 1] = 'replayed'; answer[#answer + 1] = 0
    if p.packed_answer == true and stored:byte(1) == 1 then return stored end
    if answer[4] == false then answer[4] = lease_pairs(rec, state) end
    return nil
end

-- answer: result(code, 'lease', lease_pairs(rec, state), ...); previous:
-- the state before. Returns store_answer's.
local function remember(ks, ns, op, i, p, answer, rec, state, previous, t)
    audit_mutation(ks, ns, t, op, i, p, answer[2], rec, state, previous)
    return store_answer(ks, ns, op, i, p, answer, rec.lease_id, rec, state)
end

local function retry_after(expires_at, t)
    return math.min(1000, math.max(50, expires_at - t))
end

-- The preamble of every lease operation: the request, its call checks, the
-- deadline, the namespace. Returns p, ks, ns, t or nil and an answer.
-- The call checks and the deadline of one decoded request: nil, or the
-- answer that refuses it.
local function call_refusal(p, mutation, t)
    local fault = call_fault(p, mutation)
    if fault then return unavailable(fault) end
    if t >= p.deadline_at_ms then return result('deadline_exceeded') end
    return nil
end

local function begin(keys, args, mutation)
    local p = decode_request(args)
    local t = now_ms()
    local refusal = call_refusal(p, mutation, t)
    if refusal then return nil, refusal end
    local ks = keyspace(keys[1])
    return p, ks, load_ns(ks), t
end

-- ---------------------------------------------------------------------------
-- Metadata: the rules of lease._bad_metadata (docs/api.md "Metadata"), so
-- that a caller of the function (redis-cli as well as leased) gets the typed
-- refusal PostgreSQL gives: a flat object of at most 16 keys [a-z0-9_]{1,64},
-- values boolean, string of at most 256 bytes or number of magnitude at most
-- 2^53 - 1 (judged as the double it decodes to, as C and PostgreSQL judge a
-- real), at most 2048 bytes compact. The offending field ('metadata', or
-- 'metadata.<key>' cut at 64 bytes), or nil; keys are checked in jsonb's
-- order (shorter first, then by bytes), so the first bad key named is
-- PostgreSQL's. tests/vectors/metadata.json holds this to the same answers
-- (tests/valkey/valkey_functions.c, metadata_vectors).

local METADATA_KEYS_MAX = 16
local METADATA_STRING_MAX = 256
local METADATA_NUMBER_MAX = 9007199254740991
local METADATA_TEXT_MAX = 65536   -- text longer than this is not decoded at all

-- Bytes of s written as a JSON string, quotes included (what the compact
-- text holds: " and \ and the short escapes take two bytes, other control
-- characters six, the rest as they are).
local function json_string_len(s)
    local n = #s + 2
    for c in s:gmatch('[%z\1-\31"\\]') do
        if c == '"' or c == '\\' or c == '\b' or c == '\f' or c == '\n' or c == '\r'
           or c == '\t' then
            n = n + 1
        else
            n = n + 5
        end
    end
    return n
end

-- Bytes of a number in the compact text: an integral value as an integer,
-- a real in its shortest form that reads back the same.
local function json_number_len(v)
    if v == math.floor(v) then return #string.format('%d', v) end
    for digits = 15, 17 do
        local t = string.format('%.' .. digits .. 'g', v)
        if tonumber(t) == v then return #t end
    end
    return #string.format('%.17g', v)
end

local function jsonb_key_order(a, b)
    if #a ~= #b then return #a < #b end
    return a < b
end

local function bad_metadata(text)
    if not is_str(text) or #text > METADATA_TEXT_MAX or not text:find('^%s*{') then
        return 'metadata'   -- not an object's text (cjson reads [] as {})
    end
    local ok, m = pcall(cjson.decode, text)
    if not ok or type(m) ~= 'table' then return 'metadata' end
    local keys, n = {}, 0
    for k in pairs(m) do
        if type(k) ~= 'string' then return 'metadata' end
        n = n + 1; keys[n] = k
    end
    if n > METADATA_KEYS_MAX then return 'metadata' end
    table.sort(keys, jsonb_key_order)
    local size = 2
    for j = 1, n do
        local k = keys[j]
        local field = ('metadata.' .. k):sub(1, 64)
        if #k > 64 or not k:find('^[a-z0-9_]+$') then return field end
        local v, len = m[k], nil
        if type(v) == 'boolean' then
            len = v and 4 or 5
        elseif type(v) == 'string' then
            if #v > METADATA_STRING_MAX then return field end
            len = json_string_len(v)
        elseif type(v) == 'number' then
            -- NaN fails the comparison, an infinity the bound
            if not (math.abs(v) <= METADATA_NUMBER_MAX) then return field end
            len = json_number_len(v)
        else
            return field   -- null, an object, an array
        end
        size = size + json_string_len(k) + 1 + len + (j > 1 and 1 or 0)
    end
    if size > METADATA_MAX then return 'metadata' end
    return nil
end

-- ---------------------------------------------------------------------------
-- acquire-if-free (lease._acquire_t), without waiting: waiting is the
-- caller's loop of calls, as in Postgres.

local function acquire_decide(ks, ns, t, p)
    local i, bad = identity(p.lock_identity)
    if i == nil then return invalid(bad) end
    if not id_ok(p.service_instance_id) then return invalid('service_instance_id') end
    if not id_ok(p.execution_id) then return invalid('execution_id') end
    if not id_ok(p.job_id) then return invalid('job_id') end
    local trace = p.trace_id
    if trace == cjson.null then trace = nil end
    if trace ~= nil and not id_ok(trace) then return invalid('trace_id') end
    local why = guard(ks, ns, false)
    if why then return unavailable(why) end
    local ttl, maxlife = ns.default_ttl_ms, ns.maximum_lifetime_ms
    if p.ttl_ms ~= nil and p.ttl_ms ~= cjson.null then
        ttl = posint(p.ttl_ms)
        if not ttl or ttl <= ns.minimum_ttl_ms or ttl > ns.maximum_ttl_ms then
            return invalid('ttl_ms', 'ttl_ms must be greater than ' .. I(ns.minimum_ttl_ms)
                           .. ' and at most ' .. I(ns.maximum_ttl_ms))
        end
    end
    if p.maximum_lifetime_ms ~= nil and p.maximum_lifetime_ms ~= cjson.null then
        maxlife = posint(p.maximum_lifetime_ms)
        if not maxlife or maxlife <= ns.minimum_ttl_ms or maxlife > ns.maximum_lifetime_ms then
            return invalid('maximum_lifetime_ms', 'maximum_lifetime_ms must be greater than '
                           .. I(ns.minimum_ttl_ms) .. ' and at most '
                           .. I(ns.maximum_lifetime_ms))
        end
    end
    local metadata = '{}'
    if p.metadata_json ~= nil and p.metadata_json ~= cjson.null then
        local bad = bad_metadata(p.metadata_json)
        if bad then return invalid(bad) end
        metadata = p.metadata_json
    end

    local r = replay(ks, 'acquire', i, p, t)
    if r then return r end
    local rec = read_for_acquire(ks, i)
    if rec == false then return unavailable('corrupt_record') end
    local prev = 'none'
    if rec and rec.state == 'active' then
        prev = state_now(rec, t)
        if prev == 'active' then
            return result('lease_conflict', 'retry_after_ms',
                          retry_after(tonumber(rec.expires_at), t))
        end
    end
    -- the next token: a new epoch restarts seq, and its first token is
    -- greater than every token of earlier epochs
    local epoch, seq = ns.epoch, 1
    if rec then
        local rec_epoch = tonumber(rec.epoch)
        if rec_epoch > epoch then return unavailable('corrupt_record') end
        if rec_epoch == epoch then seq = tonumber(rec.seq) + 1 end
    end
    if seq > SEQ_MAX then return unavailable('token_limit') end
    local token = epoch * SEQ_SPAN + seq
    local lid_seq = ns.lid_seq + 1

    -- Decided: the writes.
    if prev == 'expired' then
        end_lease(ks, ns, rec, 'expired', tonumber(rec.expires_at), nil, nil)
    end
    local lease_id = string.format('lease_%012x%04x%016x', t, epoch % 65536, lid_seq)
    redis.call('HSET', ks.ns, 'lid_seq', I(lid_seq))
    ns.lid_seq = lid_seq   -- the next item of a combined call counts on from it
    local expires = t + math.min(ttl, maxlife)
    local at, until_ = IC(t), I(expires)
    local new = {
        v = '1', c = i.canonical, epoch = IC(epoch), seq = I(seq), state = 'active',
        tenant_id = i.tenant_id, program_id = i.program_id,
        target_namespace = i.target_namespace, target_id = i.target_id,
        actor_name = i.actor_name, workflow_name = i.workflow_name,
        operation_class = i.operation_class,
        lease_id = lease_id, token = I(token), owner = p.principal.principal_id,
        owner_client = is_str(p.principal.client_id) and p.principal.client_id or '',
        owner_cred = is_str(p.principal.credential_id) and p.principal.credential_id or '',
        sid = p.service_instance_id, acquired_at = at, renewed_at = at,
        expires_at = until_, ttl_ms = IC(ttl), maxlife_ms = IC(maxlife),
        execution_id = p.execution_id, job_id = p.job_id, trace_id = trace or '',
        request_id = p.request_id, metadata = metadata,
    }
    -- every member of new, named one by one (no flattened copy of the record)
    redis.call('HSET', ks.ident(i.canonical), 'v', new.v, 'c', new.c, 'epoch', new.epoch,
               'seq', new.seq, 'state', new.state, 'tenant_id', new.tenant_id,
               'program_id', new.program_id, 'target_namespace', new.target_namespace,
               'target_id', new.target_id, 'actor_name', new.actor_name,
               'workflow_name', new.workflow_name, 'operation_class', new.operation_class,
               'lease_id', new.lease_id, 'token', new.token, 'owner', new.owner,
               'owner_client', new.owner_client, 'owner_cred', new.owner_cred, 'sid', new.sid,
               'acquired_at', new.acquired_at, 'renewed_at', new.renewed_at,
               'expires_at', new.expires_at, 'ttl_ms', new.ttl_ms, 'maxlife_ms', new.maxlife_ms,
               'execution_id', new.execution_id, 'job_id', new.job_id,
               'trace_id', new.trace_id, 'request_id', new.request_id,
               'metadata', new.metadata)
    redis.call('SET', ks.index(lease_id), i.canonical)
    redis.call('SADD', ks.active, i.canonical)
    redis.call('ZADD', ks.expiring, until_, i.canonical)
    local answer = result('lease_acquired', 'lease', false, 'previous_state', prev)
    local packed = remember(ks, ns, 'acquire', i, p, answer, new, 'active', prev, t)
    if prev == 'expired' then publish_ended(ks, {rec.lease_id}) end
    if packed then return packed_answer(packed, '0', 'active') end
    answer[#answer + 1] = 'current_state'; answer[#answer + 1] = 'active'
    return answer
end

local function acquire(keys, args)
    local p, ks, ns, t = begin(keys, args, true)
    if p == nil then return ks end
    return acquire_decide(ks, ns, t, p)
end

-- The owner's (or an administrator's) reference to a lease, checked.
local function lease_ref(p)
    local i, bad = identity(p.lock_identity)
    if i == nil then return nil, bad end
    if not id_ok(p.lease_id) then return nil, 'lease_id' end
    if not posint(p.fencing_token) then return nil, 'fencing_token' end
    return i
end

-- The exact live lease named, or nil: active, unexpired, same lease id and
-- token, and (owner) the same principal and service instance.
local function matches(rec, p, t, as_owner)
    if not rec or rec.state ~= 'active' or tonumber(rec.expires_at) <= t then return false end
    if rec.lease_id ~= p.lease_id or tonumber(rec.token) ~= p.fencing_token then return false end
    if as_owner and (rec.owner ~= p.principal.principal_id
                     or rec.sid ~= p.service_instance_id) then
        return false
    end
    return true
end

-- renew-if-owner (lease._renew_t)
local function renew_decide(ks, ns, t, p)
    local i, bad = lease_ref(p)
    if i == nil then return invalid(bad) end
    if not id_ok(p.service_instance_id) then return invalid('service_instance_id') end
    local why = guard(ks, ns, false)
    if why then return unavailable(why) end
    local ttl
    if p.ttl_ms ~= nil and p.ttl_ms ~= cjson.null then
        ttl = posint(p.ttl_ms)
        if not ttl or ttl <= ns.minimum_ttl_ms or ttl > ns.maximum_ttl_ms then
            return invalid('ttl_ms', 'ttl_ms must be greater than ' .. I(ns.minimum_ttl_ms)
                           .. ' and at most ' .. I(ns.maximum_ttl_ms))
        end
    end
    local r = replay(ks, 'renew', i, p, t)
    if r then return r end
    local rec = read_ident(ks, i)
    if rec == false then return unavailable('corrupt_record') end
    if not matches(rec, p, t, true) then return result('lease_lost') end
    ttl = ttl or tonumber(rec.ttl_ms)
    local expires = math.min(t + ttl, tonumber(rec.acquired_at) + tonumber(rec.maxlife_ms))
    redis.call('HSET', ks.ident(i.canonical), 'renewed_at', IC(t), 'expires_at', I(expires),
               'ttl_ms', IC(ttl))
    redis.call('ZADD', ks.expiring, I(expires), i.canonical)
    rec.renewed_at, rec.expires_at, rec.ttl_ms = IC(t), I(expires), IC(ttl)
    local answer = result('lease_renewed', 'lease', false)
    local packed = remember(ks, ns, 'renew', i, p, answer, rec, 'active', 'active', t)
    if packed then return packed_answer(packed, '0', 'active') end
    answer[#answer + 1] = 'current_state'; answer[#answer + 1] = 'active'
    return answer
end

local function renew(keys, args)
    local p, ks, ns, t = begin(keys, args, true)
    if p == nil then return ks end
    return renew_decide(ks, ns, t, p)
end

-- release-if-owner, force-release and revoke (lease._end_t)
local function ending_decide(ks, ns, t, p, op, terminal, success)
    local as_owner = op == 'release'
    local i, bad = lease_ref(p)
    if i == nil then return invalid(bad) end
    local reason, incident
    if as_owner then
        if not id_ok(p.service_instance_id) then return invalid('service_instance_id') end
    else
        if not reason_ok(p.reason) then return invalid('reason') end
        reason = p.reason
        if p.incident_id ~= nil and p.incident_id ~= cjson.null and p.incident_id ~= '' then
            if op ~= 'revoke' or not id_ok(p.incident_id) then return invalid('incident_id') end
            incident = p.incident_id
        end
    end
    local why = guard(ks, ns, false)
    if why then return unavailable(why) end
    local r = replay(ks, op, i, p, t)
    if r then return r end
    local rec = read_ident(ks, i)
    if rec == false then return unavailable('corrupt_record') end
    if not matches(rec, p, t, as_owner) then return result('lease_lost') end
    local ended = end_lease(ks, ns, rec, terminal, t, reason, incident)
    local answer = result(success, 'lease', false)
    local packed = remember(ks, ns, op, i, p, answer, ended, terminal, 'active', t)
    publish_ended(ks, {rec.lease_id})
    if packed then return packed_answer(packed, '0', terminal) end
    answer[#answer + 1] = 'current_state'; answer[#answer + 1] = terminal
    return answer
end

local function ending(keys, args, op, terminal, success)
    local p, ks, ns, t = begin(keys, args, true)
    if p == nil then return ks end
    return ending_decide(ks, ns, t, p, op, terminal, success)
end

local function release(keys, args)
    return ending(keys, args, 'release', 'released', 'lease_released')
end

local function force_release(keys, args)
    return ending(keys, args, 'force_release', 'released', 'lease_released')
end

local function revoke(keys, args)
    return ending(keys, args, 'revoke', 'revoked', 'lease_revoked')
end

-- ---------------------------------------------------------------------------
-- renew_many and release_many (lease._renew_many, lease._release_many):
-- 1 to 100 requests, each with its own request id, digest and deadline,
-- each decided exactly as the single function decides it, in order, in one
-- call (one TIME). Only the batch's shape refuses it as a whole, before
-- anything is written; the answer is {"results", {answer...}}.

local BATCH_MAX = 100

local function many(keys, args, member, decide)
    local b = decode_request(args)
    local items = b and b[member]
    if type(items) ~= 'table' or #items < 1 or #items > BATCH_MAX then
        return invalid(member)
    end
    local t = now_ms()
    local ks = keyspace(keys[1])
    local ns = load_ns(ks)
    local answers = {}
    for k = 1, #items do
        local p = items[k]
        answers[k] = call_refusal(p, true, t) or decide(ks, ns, t, p)
    end
    return {'results', answers}
end

local function renew_many(keys, args)
    return many(keys, args, 'renewals', renew_decide)
end

local function release_decide(ks, ns, t, p)
    return ending_decide(ks, ns, t, p, 'release', 'released', 'lease_released')
end

local function release_many(keys, args)
    return many(keys, args, 'releases', release_decide)
end

-- ---------------------------------------------------------------------------
-- combined: the concurrent requests of several callers in one call (the
-- adapter's combiner, docs/backends.md "Combined calls"). ARGV is pairs
-- op, request JSON (op: acquire, renew or release; the JSON exactly what
-- leased_v1_<op> takes); the answer is an array of one answer per pair, in
-- order, each the answer leased_v1_<op> would have given had the pairs
-- been separate calls made one after another: the same decide functions,
-- each item seeing what the items before it wrote (the namespace record is
-- kept in step: lid_seq, the seal, replid). Shared by the items: one TIME,
-- one load of the namespace, one incarnation check.
-- An item that raises a runtime error answers what such an error answers
-- as a call of its own (the adapter maps a call's error reply to
-- lease_backend_unavailable, reason server_error) and the items after it
-- still run. Nothing rolls back: what the items before it (and the failing
-- item itself, up to its error) wrote stays written, as with separate
-- calls. A malformed ARGV (odd, empty, over COMBINED_MAX pairs, or an op
-- not listed) is refused whole before anything is read: invalid 'items'.

local COMBINED_MAX = 64
local COMBINED_OPS = {acquire = acquire_decide, renew = renew_decide, release = release_decide}

-- One item: its request decoded, its call checks, its decision.
local function combined_item(ks, ns, t, decide, json)
    local ok, p = pcall(cjson.decode, json)
    if not ok or type(p) ~= 'table' then p = nil end
    return call_refusal(p, true, t) or decide(ks, ns, t, p)
end

local function combined(keys, args)
    local n = #args
    if n < 2 or n % 2 ~= 0 or n > 2 * COMBINED_MAX then return invalid('items') end
    for k = 1, n, 2 do
        if COMBINED_OPS[args[k]] == nil then return invalid('items') end
    end
    local t = now_ms()
    local ks = keyspace(keys[1])
    local ns = load_ns(ks)
    local answers = {}
    for k = 1, n, 2 do
        local ok, answer = pcall(combined_item, ks, ns, t, COMBINED_OPS[args[k]], args[k + 1])
        if not ok then answer = unavailable('server_error') end
        answers[#answers + 1] = answer
    end
    return answers
end

-- ---------------------------------------------------------------------------
-- inspect (lease.inspect): by identity (its live lease) or by lease id (live
-- or terminal), never outside the scope given (lease_not_found).

local function in_scope(scope, tenant, program, actor)
    if scope.tenant_id ~= tenant then return false end
    if scope.program_id ~= '*' and scope.program_id ~= program then return false end
    local actors = scope.actor_names
    for _, a in ipairs(actors) do
        if a == '*' or a == actor then return true end
    end
    return false
end

local function scope_ok(s)
    if type(s) ~= 'table' or not is_str(s.tenant_id) or not is_str(s.program_id)
       or type(s.actor_names) ~= 'table' then
        return false
    end
    for _, a in ipairs(s.actor_names) do
        if not is_str(a) then return false end
    end
    return true
end

local function inspect(keys, args)
    local p, ks, ns, t = begin(keys, args, false)
    if p == nil then return ks end
    if not scope_ok(p.scope) then return unavailable('malformed_call') end
    if ns == nil or ns == false then return unavailable(ns == nil and 'namespace_unbound'
                                                        or 'corrupt_namespace') end
    local rec
    if p.lock_identity ~= nil and p.lock_identity ~= cjson.null then
        local i, bad = identity(p.lock_identity)
        if i == nil then return invalid(bad) end
        rec = read_ident(ks, i)
    elseif id_ok(p.lease_id) then
        local canonical = redis.call('GET', ks.index(p.lease_id))
        if canonical then
            rec = hgetall(ks.ident(canonical))
            if rec and (rec.v ~= '1' or rec.c ~= canonical) then rec = false end
        end
        if rec ~= false and (not rec or rec.lease_id ~= p.lease_id or rec.state ~= 'active') then
            local h = hgetall(ks.hist(p.lease_id))
            if h and in_scope(p.scope, h.tenant_id, h.program_id, h.actor_name) then
                return result('lease_inspected', 'lease', lease_pairs(h, h.state))
            end
            return result('lease_not_found')
        end
    elseif p.lease_id ~= nil then
        return invalid('lease_id')
    else
        return invalid('lock_identity')
    end
    if rec == false then return unavailable('corrupt_record') end
    if not rec or rec.state ~= 'active'
       or not in_scope(p.scope, rec.tenant_id, rec.program_id, rec.actor_name) then
        return result('lease_not_found')
    end
    return result('lease_inspected', 'lease', lease_pairs(rec, state_now(rec, t)))
end

-- ---------------------------------------------------------------------------
-- Fencing (lease._fence, lease._accept_token): a write fenced by a lease
-- may happen only while that lease is the active, unexpired, exact lease of
-- its identity and its token is not below the identity's high-water mark
-- of accepted tokens (hw, in the identity record, never lowered).

-- The identity's high-water mark (0: none accepted yet).
local function high_water(rec)
    return (rec and tonumber(rec.hw or '0')) or 0
end

-- Records token as accepted (raises hw; never lowers it).
local function accept_token(ks, i, rec, token)
    if token > high_water(rec) then
        redis.call('HSET', ks.ident(i.canonical), 'hw', I(token))
    end
end

-- fence_check (lease.fence_check): whether a write fenced by this lease may
-- happen now. Postgres raises LS010/LS011 into the caller's transaction;
-- here the answer is lease_lost with reason fence_stale_token (the token is
-- below the high-water mark, whatever else) or fence_lost (not the live
-- lease), as lease.fence_check chooses between them, or lease_inspected
-- with expires_at; the token is then recorded as accepted.

local function fence_check(keys, args)
    local p, ks, ns, t = begin(keys, args, false)
    if p == nil then return ks end
    local i, bad = lease_ref(p)
    if i == nil then return invalid(bad) end
    local owner = p.owner_principal_id
    if owner == cjson.null then owner = nil end
    if owner ~= nil and not id_ok(owner) then return invalid('owner_principal_id') end
    local why = guard(ks, ns, false)
    if why then return unavailable(why) end
    local rec = read_ident(ks, i)
    if rec == false then return unavailable('corrupt_record') end
    if p.fencing_token < high_water(rec) then
        return result('lease_lost', 'reason', 'fence_stale_token')
    end
    if not matches(rec, p, t, false) or (owner and rec.owner ~= owner) then
        return result('lease_lost', 'reason', 'fence_lost')
    end
    accept_token(ks, i, rec, p.fencing_token)
    return result('lease_inspected', 'expires_at', tonumber(rec.expires_at))
end

-- ---------------------------------------------------------------------------
-- fenced_commit (lease.fenced_commit): documents written only while the
-- presented lease is the active, unexpired, exact lease of its identity,
-- held by the caller for the same execution, and its token not below the
-- high-water mark. The request id is looked up first (a repeated commit
-- must not meet its own documents' new revisions as a write_conflict); then
-- every document's expected revision is compared before the first write, so
-- a conflict writes nothing. A document is lease:{ns}:d:<identity>:<key>
-- (revision, body as the caller's JSON text, and the fence that wrote it),
-- never expired, as lease.fenced_documents rows are not.
-- Publications (lease.outbox) need PostgreSQL and its relay: a commit with
-- one is refused whole (lease_backend_unavailable, outbox_requires_postgres)
-- before anything is written.

local WRITES_MAX = 32
local DOC_KEY_MAX = 256
local TOPIC_MAX = 255     -- an AMQP short string (docs/relay.md)
local REVISION_MAX = 9007199254740990

local WRITE_MEMBERS = {document = {kind = true, key = true, expected_revision = true,
                                   body_json = true},
                       publication = {kind = true, topic = true, payload_json = true}}

-- A JSON object given as text (stored byte for byte), else nil.
local function object_text(v)
    if not is_str(v) or not v:find('^%s*{') then return nil end
    local ok, o = pcall(cjson.decode, v)
    if not ok or type(o) ~= 'table' then return nil end
    return v
end

local function name_ok(v, max)
    return is_str(v) and #v >= 1 and #v <= max and not v:find('[^A-Za-z0-9._:/-]')
end

-- The offending field of the writes (lease._bad_writes), or nil.
local function bad_writes(w)
    if type(w) ~= 'table' or #w < 1 or #w > WRITES_MAX then return 'writes' end
    local seen = {}
    for idx = 1, #w do
        local x = w[idx]
        local f = 'writes[' .. (idx - 1) .. ']'
        if type(x) ~= 'table' then return f end
        local members = WRITE_MEMBERS[x.kind]
        if members == nil then return f .. '.kind' end
        for k in pairs(x) do
            if not members[k] then
                return f .. '.' .. tostring(k):gsub('_json$', '')
            end
        end
        if x.kind == 'document' then
            if not name_ok(x.key, DOC_KEY_MAX) or seen[x.key] then return f .. '.key' end
            seen[x.key] = true
            local er = x.expected_revision
            if type(er) ~= 'number' or er ~= er or er < 0 or er > REVISION_MAX
               or math.floor(er) ~= er then
                return f .. '.expected_revision'
            end
            if not object_text(x.body_json) then return f .. '.body' end
        else
            if not name_ok(x.topic, TOPIC_MAX) then return f .. '.topic' end
            if not object_text(x.payload_json) then return f .. '.payload' end
        end
    end
    return nil
end

local function fenced_commit(keys, args)
    local p, ks, ns, t = begin(keys, args, true)
    if p == nil then return ks end
    local i, bad = lease_ref(p)
    if i == nil then return invalid(bad) end
    if not id_ok(p.execution_id) then return invalid('execution_id') end
    local trace = p.trace_id
    if trace == cjson.null then trace = nil end
    if trace ~= nil and not id_ok(trace) then return invalid('trace_id') end
    bad = bad_writes(p.writes)
    if bad then return invalid(bad) end
    for idx = 1, #p.writes do
        if p.writes[idx].kind == 'publication' then
            return unavailable('outbox_requires_postgres')
        end
    end
    local why = guard(ks, ns, false)
    if why then return unavailable(why) end
    local r = replay(ks, 'commit', i, p, t)
    if r then return r end

    local rec = read_ident(ks, i)
    if rec == false then return unavailable('corrupt_record') end
    if not matches(rec, p, t, false) or rec.owner ~= p.principal.principal_id
       or rec.execution_id ~= p.execution_id or p.fencing_token < high_water(rec) then
        return result('lease_lost')
    end
    -- every expected revision first: a conflict writes nothing
    local docs = {}
    for idx = 1, #p.writes do
        local x = p.writes[idx]
        local key = ks.doc(i.canonical, x.key)
        local cur = tonumber(redis.call('HGET', key, 'revision') or '0')
        if cur == nil then return unavailable('corrupt_record') end
        if cur ~= x.expected_revision then
            return result('write_conflict', 'field',
                          'writes[' .. (idx - 1) .. '].expected_revision',
                          'current_revision', cur)
        end
        docs[idx] = key
    end

    -- Decided: the writes.
    local results = {}
    for idx = 1, #p.writes do
        local x = p.writes[idx]
        local revision = x.expected_revision + 1
        redis.call('HSET', docs[idx], 'revision', I(revision), 'body', x.body_json,
                   'fencing_token', I(p.fencing_token), 'lease_id', rec.lease_id,
                   'execution_id', rec.execution_id, 'trace_id', trace or '',
                   'updated_at', I(t))
        results[idx] = {'kind', 'document', 'key', x.key, 'revision', revision}
    end
    accept_token(ks, i, rec, p.fencing_token)
    local answer = result('commit_accepted', 'lease_id', rec.lease_id,
                          'fencing_token', p.fencing_token, 'results', results)
    local pr = p.principal
    audit_append(ks, ns, t, {
        'event_type', 'target_lease_commit', 'occurred_at_ms', t, 'code', 'commit_accepted',
        'decision', 'allow', 'backend_health', 'ok', 'source', 'function',
        'principal_id', str_or_nil(pr.principal_id), 'client_id', str_or_nil(pr.client_id),
        'credential_id', str_or_nil(pr.credential_id),
        'request_id', str_or_nil(p.request_id), 'correlation_id', str_or_nil(p.correlation_id),
        'trace_id', trace or false,
        'tenant_id', i.tenant_id, 'program_id', i.program_id,
        'target_namespace', i.target_namespace, 'target_id', i.target_id,
        'actor_name', i.actor_name, 'workflow_name', i.workflow_name,
        'operation_class', i.operation_class,
        'lease_id', rec.lease_id, 'fencing_token', p.fencing_token,
        'previous_state', 'active', 'resulting_state', 'active',
        'service_instance_id', rec.sid, 'execution_id', rec.execution_id,
        'job_id', rec.job_id,
    })
    store_answer(ks, ns, 'commit', i, p, answer, rec.lease_id)
    return answer
end

-- ---------------------------------------------------------------------------
-- expire_due (lease.expire_due): the service's expiry step. Moves up to
-- batch leases that expired at least grace_ms ago (server TIME) into
-- history, oldest first, as an acquisition of their identity would
-- (ended_at: their expiry; not audited, as on PostgreSQL), so that a lease
-- nobody takes does not stay an active-shaped record. Found through the
-- index of live leases by expiry (lease:{ns}:exp), not a scan. An index
-- entry that names no such lease (a record changed behind the library's
-- back) is dropped from the index, nothing else. The incarnation check
-- applies. {'ran', 1, 'expired', n, 'more', 0|1, 'lag_ms', ms} or
-- {'error', why}.

local function expire_due(keys, args)
    local p = decode_request(args) or {}
    local batch = posint(p.batch)
    if not batch or batch > 10000 then return {'error', 'batch must be 1..10000'} end
    local grace = p.grace_ms
    if type(grace) ~= 'number' or grace < 0 or grace > 3600000 or math.floor(grace) ~= grace then
        return {'error', 'grace_ms must be 0..3600000'}
    end
    local ks = keyspace(keys[1])
    local ns = load_ns(ks)
    local why = guard(ks, ns, false)
    if why then return {'error', why} end
    local t = now_ms()
    local due = redis.call('ZRANGEBYSCORE', ks.expiring, '-inf', I(t - grace), 'LIMIT', 0, batch)
    -- every record read and checked before the first write
    local ending, stale = {}, {}
    for _, c in ipairs(due) do
        local rec = hgetall(ks.ident(c))
        local expires = rec and tonumber(rec.expires_at)
        if rec and rec.v == '1' and rec.c == c and rec.state == 'active' and rec.lease_id
           and expires and expires <= t - grace then
            ending[#ending + 1] = rec
        else
            stale[#stale + 1] = c
        end
    end
    local oldest = nil
    local ended = {}
    for _, rec in ipairs(ending) do
        local expires = tonumber(rec.expires_at)
        oldest = oldest and math.min(oldest, expires) or expires
        end_lease(ks, ns, rec, 'expired', expires, nil, nil)
        ended[#ended + 1] = rec.lease_id
    end
    if #stale > 0 then redis.call('ZREM', ks.expiring, unpack(stale)) end
    publish_ended(ks, ended)
    return {'ran', 1, 'expired', #ending, 'more', #due == batch and 1 or 0,
            'lag_ms', oldest and (t - oldest) or 0}
end

-- ---------------------------------------------------------------------------
-- watch_ended (lease.watch_ended): the batched poll of leased's watch hub.
-- ARGV: lease ids (at most 100000). Answers those of them that are not
-- active now (ended, expired at the server's TIME, or unknown), in the
-- order given. Reads only; a lease reported here has ended for good, one
-- reported active may end a moment later and is caught by the next poll.

local function watch_ended(keys, args)
    if #args > 100000 then return {'error', 'at most 100000 lease ids'} end
    local ks = keyspace(keys[1])
    local t = now_ms()
    local ended = {}
    for _, id in ipairs(args) do
        local c = redis.call('GET', ks.index(id))
        local f = c and redis.call('HMGET', ks.ident(c), 'lease_id', 'state', 'expires_at')
        if not (f and f[1] == id and f[2] == 'active' and (tonumber(f[3]) or 0) > t) then
            ended[#ended + 1] = id
        end
    end
    return ended
end

-- ---------------------------------------------------------------------------
-- Administration: bind (leasectl migrate), rebind (leasectl recover), health.

local POLICY_DEFAULTS = {
    minimum_ttl_ms = 1000, default_ttl_ms = 30000, maximum_ttl_ms = 300000,
    maximum_lifetime_ms = 3600000, idempotency_retention_ms = 86400000,
    history_retention_ms = 2592000000, audit_retention_ms = AUDIT_RETENTION_DEFAULT,
}

-- The page-token key as stored: 32 random bytes in lowercase hex.
local PAGE_KEY_BYTES = 32

local function page_token_key_ok(v)
    return is_str(v) and #v == PAGE_KEY_BYTES * 2 and not v:find('[^0-9a-f]')
end

-- The epoch that makes every token greater than floor_token (0: none).
local function epoch_above(floor_token)
    if floor_token == nil or floor_token == 0 then return 0 end
    return math.floor(floor_token / SEQ_SPAN) + 1
end

-- Binds a namespace that does not exist yet to this incarnation. Binding an
-- existing namespace again on the same incarnation is a no-op (migrate is
-- repeatable); on another incarnation it is refused: that is rebind's.
-- floor_token: the highest token this namespace may ever have given (a
-- namespace whose data was lost entirely): tokens start above it.
local function bind(keys, args)
    local p = decode_request(args) or {}
    local ks = keyspace(keys[1])
    local ns = load_ns(ks)
    local inc = incarnation()
    -- the key that signs list page tokens: random bytes made by the caller
    -- (leasectl migrate, in C: a function has no randomness), stored once,
    -- never answered, never in an error
    local page_key = p.page_token_key
    if page_key ~= nil and not page_token_key_ok(page_key) then
        return {'error', 'page_token_key must be ' .. PAGE_KEY_BYTES * 2 .. ' hex digits'}
    end
    if ns then
        if ns.run_id == inc.run_id and ns.replid == inc.replid and ns.sealed ~= '1' then
            -- a namespace bound before page tokens were signed gets its key
            -- at the next migrate; an existing key is never replaced (the
            -- tokens it signed stay valid)
            if page_key ~= nil and not page_token_key_ok(ns.page_token_key) then
                redis.call('HSET', ks.ns, 'page_token_key', page_key)
            end
            return {'bound', 0, 'epoch', ns.epoch, 'version', LIB_VERSION}
        end
        return {'error', 'namespace is bound to another incarnation or sealed: rebind it'}
    end
    if ns == false then return {'error', 'namespace record is corrupt'} end
    if inc.role ~= 'master' then return {'error', 'the server is a replica'} end
    local floor = 0
    if p.floor_token ~= nil then
        floor = posint(p.floor_token)
        if not floor then return {'error', 'floor_token must be a positive integer'} end
    end
    local epoch = epoch_above(floor)
    if epoch > EPOCH_MAX then return {'error', 'floor_token leaves no epoch below 2^53'} end
    local pol = {}
    for k, v in pairs(POLICY_DEFAULTS) do
        local given = p[k]
        if given ~= nil then
            given = posint(given)
            if not given then return {'error', k .. ' must be a positive integer'} end
            v = given
        end
        pol[#pol + 1] = k
        pol[#pol + 1] = I(v)
    end
    if page_key ~= nil then
        pol[#pol + 1] = 'page_token_key'
        pol[#pol + 1] = page_key
    end
    redis.call('HSET', ks.ns, 'version', I(LIB_VERSION), 'run_id', inc.run_id,
               'replid', inc.replid, 'epoch', I(epoch), 'lid_seq', '0', 'sealed', '0',
               'bound_at_ms', I(now_ms()), unpack(pol))
    return {'bound', 1, 'epoch', epoch, 'version', LIB_VERSION}
end

-- Rebinds the namespace to the incarnation it runs on now (after a restart,
-- a restore or a promotion): the epoch rises by one (or above floor_token),
-- every lease held in the old incarnation is revoked, the seal is lifted.
local function rebind(keys, args)
    local p = decode_request(args) or {}
    local ks = keyspace(keys[1])
    local ns = load_ns(ks)
    if not ns then return {'error', 'namespace is not bound (or corrupt)'} end
    if not reason_ok(p.reason) then return {'error', 'a reason (1..512) is required'} end
    local inc = incarnation()
    if inc.role ~= 'master' then return {'error', 'the server is a replica'} end
    local floor = 0
    if p.floor_token ~= nil then
        floor = posint(p.floor_token)
        if not floor then return {'error', 'floor_token must be a positive integer'} end
    end
    local epoch = math.max(ns.epoch + 1, epoch_above(floor))
    if epoch > EPOCH_MAX then return {'error', 'no epoch left below 2^53'} end
    local t = now_ms()
    -- read every live lease before the first write
    local live = {}
    for _, c in ipairs(redis.call('SMEMBERS', ks.active)) do
        local rec = hgetall(ks.ident(c))
        if rec and rec.state == 'active' and rec.c == c and rec.lease_id then
            live[#live + 1] = rec
        end
    end
    local operator = str_or_nil(p.operator)
    local why = 'epoch rebind: ' .. p.reason
    for _, rec in ipairs(live) do
        end_lease(ks, ns, rec, 'revoked', t, why, nil)
        -- each revocation the rebind implies, as lease.recover_epoch's
        -- _to_history records it
        audit_append(ks, ns, t, {
            'event_type', 'target_lease_revoke', 'occurred_at_ms', t, 'code', 'lease_revoked',
            'decision', 'allow', 'backend_health', 'ok', 'source', 'function',
            'principal_id', operator, 'tenant_id', rec.tenant_id, 'program_id', rec.program_id,
            'target_namespace', rec.target_namespace, 'target_id', rec.target_id,
            'actor_name', rec.actor_name, 'workflow_name', rec.workflow_name,
            'operation_class', rec.operation_class, 'lease_id', rec.lease_id,
            'fencing_token', tonumber(rec.token), 'previous_state', 'active',
            'resulting_state', 'revoked', 'service_instance_id', str_or_nil(rec.sid),
            'reason', why,
        })
    end
    redis.call('HSET', ks.ns, 'run_id', inc.run_id, 'replid', inc.replid, 'epoch', I(epoch),
               'sealed', '0', 'sealed_reason', '', 'rebound_at_ms', I(t))
    -- the rebind itself, high priority (lease.recover_epoch's
    -- target_lease_recover): who, why, the epoch and the floor it moved to
    audit_append(ks, ns, t, {
        'event_type', 'target_lease_recover', 'occurred_at_ms', t, 'code', 'lease_revoked',
        'decision', 'allow', 'backend_health', 'ok', 'source', 'function', 'priority', 'high',
        'principal_id', operator, 'reason', why, 'incident_id', str_or_nil(p.incident_id),
        'epoch', epoch, 'previous_epoch', ns.epoch, 'floor_token', floor > 0 and floor or nil,
        'token_floor', epoch * SEQ_SPAN, 'leases_revoked', #live,
    })
    local ended = {}
    for _, rec in ipairs(live) do ended[#ended + 1] = rec.lease_id end
    publish_ended(ks, ended)
    return {'epoch', epoch, 'leases_revoked', #live}
end

local function health(keys, args)
    local ks = keyspace(keys[1])
    local ns = load_ns(ks)
    local why = guard(ks, ns, true)
    return {'version', LIB_VERSION, 'bound', ns and 1 or 0,
            'sealed', why and 1 or 0, 'reason', why or false,
            'epoch', ns and ns.epoch or false,
            'active_leases', redis.call('SCARD', ks.active)}
end

-- ---------------------------------------------------------------------------
-- list (lease._list): the active, unexpired leases of one tenant/program
-- (and target, or owner), inside the caller's scope, in identity order,
-- paged by the last identity shown. The identity order is the order of the
-- canonical texts: '"' sorts below every character a component may hold.
-- Cost: every call reads the live set of the namespace (SMEMBERS) and the
-- records of those of this tenant/program (docs/backends.md).

local LIST_KINDS = {owner = true, target = true, program = true}
local PAGE_DEFAULT, PAGE_MAX = 100, 500   -- lease.policy's defaults

local function hex(s)
    return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))
end

local function unhex(h)
    if #h % 2 ~= 0 or h:find('[^0-9a-f]') then return nil end
    return (h:gsub('..', function(x) return string.char(tonumber(x, 16)) end))
end

-- HMAC-SHA1 (RFC 2104) of msg under key (raw bytes, at most one 64-byte
-- block), in hex: redis.sha1hex is the only hash a function has. HMAC, not
-- SHA-1(key || msg), which a caller could extend past its end.
local function hmac_sha1_hex(key, msg)
    local inner, outer = {}, {}
    for i = 1, 64 do
        local b = key:byte(i) or 0
        inner[i] = string.char(bit.bxor(b, 0x36))
        outer[i] = string.char(bit.bxor(b, 0x5c))
    end
    local h = unhex(redis.sha1hex(table.concat(inner) .. msg))
    return redis.sha1hex(table.concat(outer) .. h)
end

-- A page token: the cursor (the last identity shown, after the part the
-- filter fixes) in hex, '.', and the first 128 bits of its HMAC with the
-- listing's fingerprint (lease._page_token's shape): a token is valid only
-- for the listing that issued it, and one changed character is refused.
local PAGE_MAC_HEX = 32

local function page_token(key, print, cursor)
    local payload = hex(cursor)
    return payload .. '.' .. hmac_sha1_hex(key, print .. '.' .. payload):sub(1, PAGE_MAC_HEX)
end

-- The cursor of a token this listing issued, or nil (tampered, truncated,
-- of another listing, not a token).
local function page_cursor(key, print, tok)
    if not is_str(tok) or #tok > 2048 then return nil end
    local payload, mac = tok:match('^([0-9a-f]+)%.([0-9a-f]+)$')
    if not payload or #mac ~= PAGE_MAC_HEX then return nil end
    if hmac_sha1_hex(key, print .. '.' .. payload):sub(1, PAGE_MAC_HEX) ~= mac then
        return nil
    end
    return unhex(payload)
end

local function list(keys, args)
    local p, ks, ns, t = begin(keys, args, false)
    if p == nil then return ks end
    if not scope_ok(p.scope) or not LIST_KINDS[p.by] then return unavailable('malformed_call') end
    if ns == nil or ns == false then return unavailable(ns == nil and 'namespace_unbound'
                                                        or 'corrupt_namespace') end
    local tenant = name_norm(p.tenant_id)
    if not tenant then return invalid('tenant_id') end
    local program = name_norm(p.program_id)
    if not program then return invalid('program_id') end
    local tns, target, owner = '', '', ''
    if p.by == 'target' then
        tns = namespace_norm(p.target_namespace)
        if not tns then return invalid('target_namespace') end
        target = target_norm(p.target_id)
        if not target then return invalid('target_id') end
    elseif p.by == 'owner' then
        if not id_ok(p.owner_principal_id) then return invalid('owner_principal_id') end
        owner = p.owner_principal_id
    end
    local size = PAGE_DEFAULT
    if p.page_size ~= nil and p.page_size ~= cjson.null then
        size = posint(p.page_size)
        if not size or size > PAGE_MAX then return invalid('page_size') end
    end
    -- the page token, signed with the namespace's key (bind): the listing's
    -- fingerprint and the last identity shown, checked before it is used
    local key = page_token_key_ok(ns.page_token_key) and unhex(ns.page_token_key)
    if not key then return unavailable('page_token_key_missing') end
    local print = redis.sha1hex(table.concat({p.by, tenant, program, tns, target, owner}, '\31'))
    local prefix = '["v1","' .. tenant .. '","' .. program .. '","'
    local want = prefix
    if p.by == 'target' then want = prefix .. tns .. '","' .. target .. '","' end
    local after = prefix
    if p.page_token ~= nil and p.page_token ~= cjson.null and p.page_token ~= '' then
        local c = page_cursor(key, print, p.page_token)
        if not c then return invalid('page_token') end
        after = prefix .. c
        if after:sub(1, #want) ~= want then return invalid('page_token') end
    end
    local found = {}
    for _, c in ipairs(redis.call('SMEMBERS', ks.active)) do
        if c:sub(1, #want) == want and c > after then found[#found + 1] = c end
    end
    table.sort(found)
    local page, last, more = {}, nil, false
    for _, c in ipairs(found) do
        local rec = hgetall(ks.ident(c))
        if rec and (rec.v ~= '1' or rec.c ~= c) then return unavailable('corrupt_record') end
        if rec and rec.state == 'active' and tonumber(rec.expires_at) > t
           and (owner == '' or rec.owner == owner)
           and in_scope(p.scope, rec.tenant_id, rec.program_id, rec.actor_name) then
            if #page == size then
                more = true
                break
            end
            page[#page + 1] = lease_pairs(rec, 'active')
            last = c
        end
    end
    return result('lease_listed', 'leases', page,
                  'next_page_token',
                  more and page_token(key, print, last:sub(#prefix + 1)) or false)
end

-- ---------------------------------------------------------------------------
-- Credentials (lease.credential_create / _lookup / _revoke): only the
-- secret's digest is stored (computed by leasectl, HMAC-SHA256 with the
-- pepper or SHA-256), never the secret. Administrative: answers are
-- name/value pairs, or {'error', why}.

local CAPABILITIES = {['targets:lease'] = true, ['targets:read'] = true,
                      ['targets:force-release'] = true, ['targets:revoke'] = true,
                      ['audit:read'] = true}

local function cred_key(ks, id)
    return ks.ns:sub(1, #ks.ns - 2) .. 'cred:' .. id
end

-- The set of every credential id of the namespace (for credential_list:
-- no SCAN over the keyspace).
local function cred_index(ks)
    return ks.ns:sub(1, #ks.ns - 2) .. 'creds'
end

local function credential_create(keys, args)
    local p = decode_request(args)
    if p == nil then return {'error', 'credential must be an object'} end
    local ks = keyspace(keys[1])
    local id = p.credential_id
    if not is_str(id) or not id:find('^key_[a-z2-7]+$') or #id ~= 30 then
        return {'error', 'invalid credential_id'}
    end
    if not id_ok(p.principal_id) or not id_ok(p.client_id) then
        return {'error', 'invalid principal_id or client_id'}
    end
    local tenant = name_norm(p.tenant_id)
    if not tenant then return {'error', 'invalid tenant_id'} end
    local program = p.program_id == '*' and '*' or name_norm(p.program_id)
    if not program then return {'error', 'invalid program_id'} end
    if type(p.actor_names) ~= 'table' or #p.actor_names < 1 or #p.actor_names > 32 then
        return {'error', 'actor_names must list 1 to 32 names'}
    end
    local actors = {}
    for _, a in ipairs(p.actor_names) do
        local v = a == '*' and '*' or name_norm(a)
        if not v then return {'error', 'invalid actor name'} end
        actors[#actors + 1] = v
    end
    for _, a in ipairs(actors) do
        if a == '*' and #actors > 1 then return {'error', 'actor "*" must stand alone'} end
    end
    if type(p.capabilities) ~= 'table' then return {'error', 'capabilities must be an array'} end
    local caps, seen = {}, {}
    for _, c in ipairs(p.capabilities) do
        if not CAPABILITIES[c] then return {'error', 'unknown capability'} end
        if not seen[c] then caps[#caps + 1] = c end
        seen[c] = true
    end
    table.sort(caps)
    if p.admin ~= nil and type(p.admin) ~= 'boolean' then
        return {'error', 'admin must be true or false'}
    end
    local admin = p.admin == true
    if not admin and (program == '*' or seen['targets:force-release'] or seen['targets:revoke']) then
        return {'error', 'program "*", targets:force-release and targets:revoke need an '
                         .. 'administrator credential'}
    end
    if not digest_ok(p.secret_digest) then return {'error', 'invalid secret_digest'} end
    local desc = p.description
    if desc == cjson.null then desc = nil end
    if desc ~= nil and (not is_str(desc) or #desc > 256 or desc:find('%c')) then
        return {'error', 'invalid description'}
    end
    local t = now_ms()
    local expires = p.expires_at_ms
    if expires == cjson.null then expires = nil end
    if expires ~= nil and (not posint(expires) or expires <= t) then
        return {'error', 'expires_at_ms must be a time in the future (Unix ms)'}
    end
    local key = cred_key(ks, id)
    if redis.call('EXISTS', key) == 1 then return {'error', 'credential_id exists'} end
    redis.call('HSET', key, 'credential_id', id, 'principal_id', p.principal_id,
               'client_id', p.client_id, 'tenant_id', tenant, 'program_id', program,
               'actor_names', cjson.encode(actors), 'capabilities', cjson.encode(caps),
               'admin', admin and '1' or '0', 'secret_digest', p.secret_digest,
               'description', desc or '', 'created_at', I(t),
               'expires_at', expires and I(expires) or '')
    redis.call('SADD', cred_index(ks), id)
    -- audited in the same call, as lease.credential_create is in its
    -- transaction (who: leasectl's login name, as for the rebind)
    audit_append(ks, hgetall(ks.ns), t, {
        'event_type', 'credential_create', 'occurred_at_ms', t, 'code', 'credential_created',
        'decision', 'allow', 'backend_health', 'ok', 'source', 'function', 'priority', 'high',
        'principal_id', id_ok(p.operator) and p.operator or false, 'tenant_id', tenant,
        'program_id', program, 'reason', 'credential ' .. id .. ' for ' .. p.principal_id,
    })
    return {'credential_id', id, 'principal_id', p.principal_id, 'client_id', p.client_id,
            'tenant_id', tenant, 'program_id', program, 'created_at', t,
            'expires_at', expires or false}
end

-- The service's authentication lookup: the row with "revoked" and
-- "expires_in_ms" judged at the server's TIME; {'found', 0} when absent.
local function credential_lookup(keys, args)
    local p = decode_request(args)
    if p == nil or not id_ok(p.credential_id) then return {'error', 'invalid credential_id'} end
    local c = hgetall(cred_key(keyspace(keys[1]), p.credential_id))
    if c == nil then return {'found', 0} end
    local t = now_ms()
    local expires_in = false
    if c.expires_at ~= nil and c.expires_at ~= '' then
        expires_in = math.max(0, tonumber(c.expires_at) - t)
    end
    local ok_a, actors = pcall(cjson.decode, c.actor_names or '')
    local ok_c, caps = pcall(cjson.decode, c.capabilities or '')
    if not ok_a or not ok_c or type(actors) ~= 'table' or type(caps) ~= 'table' then
        return {'error', 'corrupt credential record'}
    end
    return {'found', 1, 'credential_id', c.credential_id, 'principal_id', c.principal_id,
            'client_id', c.client_id, 'tenant_id', c.tenant_id, 'program_id', c.program_id,
            'actor_names', actors, 'capabilities', caps, 'admin', c.admin == '1' and 1 or 0,
            'secret_digest', c.secret_digest, 'created_at', tonumber(c.created_at),
            'revoked', (c.revoked_at or '') ~= '' and 1 or 0, 'expires_in_ms', expires_in}
end

local function credential_revoke(keys, args)
    local p = decode_request(args)
    if p == nil or not id_ok(p.credential_id) then return {'error', 'invalid credential_id'} end
    local ks = keyspace(keys[1])
    local key = cred_key(ks, p.credential_id)
    local c = hgetall(key)
    if c == nil or (c.revoked_at or '') ~= '' then return {'revoked', 0} end
    local t = now_ms()
    redis.call('HSET', key, 'revoked_at', I(t))
    audit_append(ks, hgetall(ks.ns), t, {
        'event_type', 'credential_revoke', 'occurred_at_ms', t, 'code', 'credential_revoked',
        'decision', 'allow', 'backend_health', 'ok', 'source', 'function', 'priority', 'high',
        'principal_id', id_ok(p.operator) and p.operator or false,
        'tenant_id', c.tenant_id or false, 'program_id', c.program_id or false,
        'reason', 'credential ' .. p.credential_id,
    })
    return {'revoked', 1}
end

-- record_audit (lease.record_audit): the service's events of what the
-- functions do not audit themselves (refusals, reads, replays), appended in
-- order. Every event is checked before the first is appended: an object
-- with an event_type, every value a string or an integer.
local function record_audit(keys, args)
    local b = decode_request(args)
    local events = b and b.events
    if type(events) ~= 'table' or #events < 1 or #events > AUDIT_BATCH_MAX then
        return invalid('events')
    end
    local rows = {}
    for k = 1, #events do
        local e = events[k]
        if type(e) ~= 'table' or not is_str(e.event_type) then return invalid('events') end
        local pairs_ = {}
        for name, v in pairs(e) do
            if type(name) ~= 'string' then return invalid('events') end
            if type(v) == 'number' then
                if v ~= math.floor(v) then return invalid('events') end
            elseif type(v) ~= 'string' and v ~= cjson.null then
                return invalid('events')
            end
            pairs_[#pairs_ + 1] = name
            pairs_[#pairs_ + 1] = v
        end
        rows[k] = pairs_
    end
    local ks = keyspace(keys[1])
    local ns = hgetall(ks.ns)
    local t = now_ms()
    for k = 1, #rows do
        audit_append(ks, ns, t, rows[k])
    end
    return result('audit_recorded', 'count', #rows)
end

-- ---------------------------------------------------------------------------
-- The audit export: an exporter reads the Stream a page at a time after the
-- last entry it has taken (audit_read, no writes), stores the page where it
-- keeps the audit, then acknowledges its last entry (audit_ack). The first
-- acknowledgement registers the export: from then on no entry after the
-- cursor is trimmed, whatever its age (audit_minid), so an export that
-- stops makes the Stream grow until it catches up (docs/backends.md).
-- Administrative: answers are name/value pairs, or {'error', why}.

local EXPORT_PAGE_DEFAULT, EXPORT_PAGE_MAX = 100, 1000

-- The first and the last entry id of the Stream (false: empty).
local function stream_ends(ks)
    local first = redis.call('XRANGE', ks.audit, '-', '+', 'COUNT', 1)
    local last = redis.call('XREVRANGE', ks.audit, '+', '-', 'COUNT', 1)
    return first[1] and first[1][1] or false, last[1] and last[1][1] or false
end

-- {'entries', {{id, {field, value, ...}}, ...}, 'cursor', id, 'first', id}:
-- up to count entries after `after` (absent: after the export cursor, or
-- from the start); 'first' is the oldest entry kept, so an exporter can
-- tell when entries it never read were trimmed (before it registered).
local function audit_read(keys, args)
    local p = decode_request(args) or {}
    local ks = keyspace(keys[1])
    local cursor = redis.call('HGET', ks.ns, 'audit_export_id')
    local after = p.after
    if after == nil or after == cjson.null or after == '' then after = cursor or '0-0' end
    if not stream_id(after) then return {'error', 'after must be a Stream entry id (ms-seq)'} end
    local count = EXPORT_PAGE_DEFAULT
    if p.count ~= nil and p.count ~= cjson.null then
        count = posint(p.count)
        if not count or count > EXPORT_PAGE_MAX then
            return {'error', 'count must be 1..' .. EXPORT_PAGE_MAX}
        end
    end
    local entries = redis.call('XRANGE', ks.audit, '(' .. after, '+', 'COUNT', count)
    for k = 1, #entries do entries[k][2] = audit_fields(entries[k][2]) end
    local first = stream_ends(ks)
    return {'entries', entries, 'cursor', cursor or false, 'first', first}
end

-- The export has taken every entry up to id: the cursor moves there (never
-- back, never past the last entry; "0-0" registers an export that has
-- taken nothing yet), and what the retention and the cursor now allow is
-- trimmed at once. Allowed when the server is out of memory: it frees it.
local function audit_ack(keys, args)
    local p = decode_request(args) or {}
    local ks = keyspace(keys[1])
    local ns = load_ns(ks)
    local why = guard(ks, ns, false)
    if why then return {'error', why} end
    local id = stream_id(p.id)
    if not id then return {'error', 'id must be a Stream entry id (ms-seq)'} end
    local cursor = stream_id(ns.audit_export_id)
    if cursor and stream_id_less(id, cursor) then
        return {'error', 'id is below the export cursor ' .. ns.audit_export_id}
    end
    local _, last = stream_ends(ks)
    local last_id = last and stream_id(last) or {0, 0}
    if stream_id_less(last_id, id) then
        return {'error', 'id is after the last entry of the audit Stream'}
    end
    local text = I(id[1]) .. '-' .. I(id[2])
    redis.call('HSET', ks.ns, 'audit_export_id', text)
    ns.audit_export_id = text
    local trimmed = redis.call('XTRIM', ks.audit, 'MINID', audit_minid(ns, now_ms()))
    return {'cursor', text, 'trimmed', trimmed}
end

-- Every credential (lease.credential_list), oldest first, never a digest:
-- an array of name/value arrays; times Unix ms (false: none).
local function credential_list(keys, args)
    local ks = keyspace(keys[1])
    local rows = {}
    for _, id in ipairs(redis.call('SMEMBERS', cred_index(ks))) do
        local c = hgetall(cred_key(ks, id))
        if c ~= nil then rows[#rows + 1] = c end
    end
    table.sort(rows, function(a, b)
        local ta, tb = tonumber(a.created_at) or 0, tonumber(b.created_at) or 0
        if ta ~= tb then return ta < tb end
        return a.credential_id < b.credential_id
    end)
    local out = {}
    for _, c in ipairs(rows) do
        local function ms(v) return (v or '') ~= '' and tonumber(v) or false end
        out[#out + 1] = {'credential_id', c.credential_id, 'principal_id', c.principal_id,
                         'client_id', c.client_id, 'tenant_id', c.tenant_id,
                         'program_id', c.program_id, 'actor_names', c.actor_names,
                         'capabilities', c.capabilities, 'admin', c.admin == '1' and 1 or 0,
                         'description', (c.description or '') ~= '' and c.description or false,
                         'created_at', ms(c.created_at), 'expires_at', ms(c.expires_at),
                         'revoked_at', ms(c.revoked_at)}
    end
    return {'credentials', out}
end

redis.register_function('leased_v1_acquire', acquire)
redis.register_function('leased_v1_renew', renew)
redis.register_function('leased_v1_release', release)
redis.register_function('leased_v1_renew_many', renew_many)
redis.register_function('leased_v1_release_many', release_many)
redis.register_function('leased_v1_combined', combined)
redis.register_function('leased_v1_force_release', force_release)
redis.register_function('leased_v1_revoke', revoke)
redis.register_function{function_name = 'leased_v1_inspect', callback = inspect,
                        flags = {'no-writes'}}
redis.register_function('leased_v1_fence_check', fence_check)
redis.register_function('leased_v1_fenced_commit', fenced_commit)
redis.register_function('leased_v1_expire_due', expire_due)
redis.register_function{function_name = 'leased_v1_watch_ended', callback = watch_ended,
                        flags = {'no-writes'}}
redis.register_function('leased_v1_bind', bind)
redis.register_function('leased_v1_rebind', rebind)
redis.register_function{function_name = 'leased_v1_health', callback = health,
                        flags = {'no-writes'}}
redis.register_function{function_name = 'leased_v1_list', callback = list,
                        flags = {'no-writes'}}
redis.register_function('leased_v1_credential_create', credential_create)
redis.register_function{function_name = 'leased_v1_credential_lookup',
                        callback = credential_lookup, flags = {'no-writes'}}
redis.register_function('leased_v1_credential_revoke', credential_revoke)
redis.register_function('leased_v1_record_audit', record_audit)
redis.register_function{function_name = 'leased_v1_audit_read', callback = audit_read,
                        flags = {'no-writes'}}
redis.register_function{function_name = 'leased_v1_audit_ack', callback = audit_ack,
                        flags = {'allow-oom'}}
redis.register_function{function_name = 'leased_v1_credential_list',
                        callback = credential_list, flags = {'no-writes'}}
