function (newDoc, oldDoc, userCtx, secObj) {
  // _design/lease_fencing (docs/fencing.md): CouchDB itself refuses a write
  // whose fencing token is lower than the stored document's, whoever sends
  // it. Every write names the lease that made it:
  //   "lease_fence": {"fencing_token": 42, "lock_identity": {7 components},
  //                   "lease_id": "...", ...}
  // Deletions are refused: CouchDB (like PouchDB) validates a document
  // created again over a deleted one against no old document at all, so a
  // deletion would forget the highest token. Mark a document deleted in its
  // body instead ({"deleted": true, "lease_fence": {...}}).
  var keys = ['tenant_id', 'program_id', 'target_namespace', 'target_id',
              'actor_name', 'workflow_name', 'operation_class'];
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
  if (typeof token !== 'number' || token < 1 || Math.floor(token) !== token) {
    throw ({forbidden: 'lease_fence.fencing_token must be a positive integer'});
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
  var old = oldDoc && oldDoc.lease_fence;
  if (!old || typeof old !== 'object' || !old.lock_identity) {
    return; // a new document, or one written before fencing was installed
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
