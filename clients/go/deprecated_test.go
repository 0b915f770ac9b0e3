package leaseclient

// The names issue 36 replaced still work (deprecated.go): code written
// against Lease, LeaseInfo and Info keeps building and behaving the same.
// Remove an alias and this file no longer compiles.

import (
	"context"
	"reflect"
	"testing"
)

func TestOldNamesStillWork(t *testing.T) {
	// the very same types, not look-alikes
	if reflect.TypeOf(Lease{}) != reflect.TypeOf(HeldLease{}) {
		t.Fatal("Lease is not HeldLease")
	}
	if reflect.TypeOf(LeaseInfo{}) != reflect.TypeOf(LeaseRecord{}) {
		t.Fatal("LeaseInfo is not LeaseRecord")
	}
	// the signatures old callers spelled with the old names
	c := New("http://127.0.0.1:9", "lsk_old", nil)
	var hold func(context.Context, Identity, HoldOptions) (*Lease, error) = c.Hold
	var listAll func(context.Context, ListRequest) ([]LeaseInfo, error) = c.ListAll
	var renewMany func(context.Context, []*OwnerRequest) ([]BatchResult, error) = c.RenewMany
	var releaseMany func(context.Context, []*OwnerRequest) ([]BatchResult, error) = c.ReleaseMany
	if hold == nil || listAll == nil || renewMany == nil || releaseMany == nil {
		t.Fatal("a method is missing")
	}
	var answer LeaseAnswer
	var info LeaseInfo = answer.Lease
	_ = info
	// Info is Record
	var held *Lease = &HeldLease{record: LeaseRecord{LeaseID: "lease_old", FencingToken: 7}}
	old, now := held.Info(), held.Record()
	if old.LeaseID != "lease_old" || old.LeaseID != now.LeaseID || old.FencingToken != now.FencingToken {
		t.Fatalf("Info() %+v, Record() %+v", old, now)
	}
	if held.ID() != "lease_old" || held.Token() != 7 {
		t.Fatalf("ID %q, Token %d", held.ID(), held.Token())
	}
}
