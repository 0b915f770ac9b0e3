function (newDoc, oldDoc, userCtx, secObj) {
  // _design/lease_fencing (docs/fencing.md): CouchDB itself refuses a write
  // whose fencing token is lower than the stored document's, whoever sends
  // it. Every write names the lease that made it:
  //   "lease_fence": {"fencing_token": 42, "lock_identity": {7 components},
  //                   "lease_id": "...", "outbox_id": 7, ...}
  // Tokens and outbox ids are integers from 1 to 2^53-1: a larger number
  // (1e308) is not an integer JavaScript holds exactly and would freeze the
  // document against every real token. Document ids are scoped per tenant:
  // "<tenant_id>:<id>", so one tenant's document never blocks another's.
  // Deletions are refused: CouchDB (like PouchDB) validates a document
  // created again over a deleted one against no old document at all, so a
  // deletion would forget the highest token. Mark a document deleted in its
  // body instead ({"deleted": true, "lease_fence": {...}}).
  var keys = ['tenant_id', 'program_id', 'target_namespace', 'target_id',
              'actor_name', 'workflow_name', 'operation_class'];
  var MAX_SAFE = 9007199254740991;
  function safe(n) {
    return typeof n === 'number' && Math.floor(n) === n && n >= 1 && n <= MAX_SAFE;
  }
  if (newDoc._id.indexOf('_design/') === 0) {
    return; // design documents: only administrators may write them anyway
  }
  if (newDoc._deleted) {
    throw ({forbidden: 'fenced documents are not deleted (that would forget their fencing ' +
                       'token): write {"deleted": true, "lease_fence": {...}} instead'});
  }
  var fence = newDoc.lease_fence;
  if (!fence || typeof fence !== 'object') {
    throw ({forbidden: 'lease_fence is required: a write names the lease that made it'});
  }
  var token = fence.fencing_token;
  if (!safe(token)) {
    throw ({forbidden: 'lease_fence.fencing_token must be a positive integer of at most 2^53-1'});
  }
  if (fence.outbox_id !== undefined && !safe(fence.outbox_id)) {
    throw ({forbidden: 'lease_fence.outbox_id must be a positive integer of at most 2^53-1'});
  }
  var identity = fence.lock_identity;
  if (!identity || typeof identity !== 'object') {
    throw ({forbidden: 'lease_fence.lock_identity is required'});
  }
  for (var i = 0; i < keys.length; i++) {
    if (typeof identity[keys[i]] !== 'string' || identity[keys[i]].length === 0) {
      throw ({forbidden: 'lease_fence.lock_identity.' + keys[i] + ' must be a non-empty string'});
    }
  }
  if (newDoc._id.indexOf(identity.tenant_id + ':') !== 0) {
    throw ({forbidden: 'the document id must start with its tenant: "<tenant_id>:"'});
  }
  var old = oldDoc && oldDoc.lease_fence;
  if (!old || typeof old !== 'object' || !old.lock_identity || !safe(old.fencing_token)) {
    // a new document, one written before fencing was installed, or one
    // whose stored token was never a valid one
    return;
  }
  for (var j = 0; j < keys.length; j++) {
    if (old.lock_identity[keys[j]] !== identity[keys[j]]) {
      throw ({forbidden: 'the document belongs to another lock identity'});
    }
  }
  if (token < old.fencing_token) {
    throw ({forbidden: 'stale fencing token ' + token + ': the document holds fencing token ' +
                       old.fencing_token});
  }
}
