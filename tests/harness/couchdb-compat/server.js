// A CouchDB-compatible HTTP server for the relay tests (see couchcompat):
// express-pouchdb in "fullCouchDB" mode over PouchDB's in-memory adapter,
// which runs design documents' validate_doc_update functions on every write
// (PUT, POST, _bulk_docs, DELETE) the way CouchDB does.
// Usage: node server.js PORT LOGFILE   (PORT 0: any free port)
'use strict';
const path = require('path');
const PouchDB = require('pouchdb-core')
  .plugin(require('pouchdb-adapter-memory'))
  .plugin(require('pouchdb-mapreduce'))
  .plugin(require('pouchdb-replication'))
  .defaults({adapter: 'memory'});
const express = require('express');

const port = Number(process.argv[2] || 0);
const logPath = process.argv[3] || path.join(process.cwd(), 'couchcompat.log');
const app = express();
app.use('/', require('express-pouchdb')(PouchDB, {
  mode: 'fullCouchDB',
  inMemoryConfig: true,
  logPath: logPath,
}));
const server = app.listen(port, '127.0.0.1', () => {
  console.log('couchcompat listening on 127.0.0.1:' + server.address().port);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => server.close(() => process.exit(0)));
}
