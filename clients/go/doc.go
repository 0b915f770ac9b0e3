// Package leaseclient is the Go client of leased: one method per route of
// docs/api.md with typed errors, Hold (acquire, keep alive on the schedule
// of docs/executor.md: by default in the client's one session, one
// keep-alive per period for all its holds; watch for loss, cancel a
// context the moment the lease is lost, fenced commits, release), and
// Consumer, which drops duplicate
// and stale deliveries of leased-relay messages (docs/relay.md).
//
// Standard library only (Go 1.19). The module path is
// leased.dev/leaseclient; it is not published anywhere: use it from this
// repository with a replace directive (docs/clients.md):
//
//	require leased.dev/leaseclient v0.0.0
//	replace leased.dev/leaseclient => /path/to/leased/clients/go
package leaseclient
