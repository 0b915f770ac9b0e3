package leaseclient

// The names issue 36 replaced, kept so that code written against them
// still builds and behaves the same (docs/clients.md, "Names"): type
// aliases are the very same types, and Info is Record.

// Lease is the earlier name of HeldLease.
//
// Deprecated: use HeldLease (Lease here named the held lease, while the
// Python client's Lease named the record).
type Lease = HeldLease

// LeaseInfo is the earlier name of LeaseRecord.
//
// Deprecated: use LeaseRecord.
type LeaseInfo = LeaseRecord

// Info is the lease as last confirmed by the service.
//
// Deprecated: use Record.
func (l *HeldLease) Info() LeaseRecord { return l.Record() }
