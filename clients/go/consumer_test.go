package leaseclient

import (
	"errors"
	"testing"
)

func relayHeaders(token any, target string) map[string]any {
	return map[string]any{
		"outbox_id": int64(7), "lease_id": "lease_05444eb60dad403393cc54784d6b8a03",
		"fencing_token": token, "tenant_id": "Tenant-Main", "program_id": "program-a",
		"target_namespace": "starintel-target", "target_id": target, "actor_name": "usernamegen",
		"workflow_name": "default", "operation_class": "default", "trace_id": "trace_1",
		"execution_id": "exec_1", "topic": "results",
	}
}

func mustParse(t *testing.T, id string, h map[string]any) Delivery {
	t.Helper()
	d, err := ParseDelivery(id, h)
	if err != nil {
		t.Fatalf("ParseDelivery(%q): %v", id, err)
	}
	return d
}

func TestConsumerDropsDuplicatesAndStale(t *testing.T) {
	c := NewConsumer(0)
	first := mustParse(t, "10", relayHeaders(int64(5), "target_01"))
	if first.Identity.TenantID != "tenant-main" || first.FencingToken != 5 || first.OutboxID != 10 {
		t.Fatalf("parsed %+v", first)
	}
	if v := c.Classify(first); v != VerdictNew {
		t.Fatalf("first delivery: %v", v)
	}
	c.Record(first)
	if v := c.Classify(first); v != VerdictDuplicate {
		t.Fatalf("redelivery: %v", v)
	}
	// same lease, next publication: equal tokens are all applied
	sameLease := mustParse(t, "11", relayHeaders("5", "target_01"))
	if v := c.Classify(sameLease); v != VerdictNew {
		t.Fatalf("same token: %v", v)
	}
	c.Record(sameLease)
	newer := mustParse(t, "12", relayHeaders(int32(6), "target_01"))
	c.Record(newer)
	older := mustParse(t, "9", relayHeaders(int64(4), "target_01"))
	if v := c.Classify(older); v != VerdictStale {
		t.Fatalf("older token after a newer one: %v", v)
	}
	// the same identity spelled with another case is the same identity
	h := relayHeaders(int64(5), "target_01")
	h["tenant_id"] = "TENANT-MAIN"
	if v := c.Classify(mustParse(t, "13", h)); v != VerdictStale {
		t.Fatalf("case-folded identity: %v", v)
	}
	// another identity (target_id keeps its case) has its own tokens
	if v := c.Classify(mustParse(t, "14", relayHeaders(int64(1), "TARGET_01"))); v != VerdictNew {
		t.Fatalf("other identity: %v", v)
	}
	// duplicate is checked before stale
	if v := c.Classify(first); v != VerdictDuplicate {
		t.Fatalf("recorded id with a now-stale token: %v", v)
	}
}

func TestConsumerWindowForgetsOldestIDs(t *testing.T) {
	c := NewConsumer(2)
	for _, id := range []string{"1", "2", "3"} {
		c.Record(mustParse(t, id, relayHeaders(int64(1), "t")))
	}
	if v := c.Classify(mustParse(t, "1", relayHeaders(int64(1), "t"))); v != VerdictNew {
		t.Fatalf("id 1 should be forgotten: %v", v)
	}
	if v := c.Classify(mustParse(t, "3", relayHeaders(int64(1), "t"))); v != VerdictDuplicate {
		t.Fatalf("id 3 should be remembered: %v", v)
	}
}

func TestParseDeliveryRejects(t *testing.T) {
	cases := []struct {
		id    string
		edit  func(map[string]any)
		field string
	}{
		{"0", nil, "message_id"},
		{"-1", nil, "message_id"},
		{"01", nil, "message_id"},
		{"99999999999999999999", nil, "message_id"},
		{"1", func(h map[string]any) { delete(h, "fencing_token") }, "fencing_token"},
		{"1", func(h map[string]any) { h["fencing_token"] = "0" }, "fencing_token"},
		{"1", func(h map[string]any) { h["fencing_token"] = 1.5 }, "fencing_token"},
		{"1", func(h map[string]any) { h["lease_id"] = "lease/1" }, "lease_id"},
		{"1", func(h map[string]any) { delete(h, "lease_id") }, "lease_id"},
		{"1", func(h map[string]any) { h["trace_id"] = "" }, "trace_id"},
		{"1", func(h map[string]any) { delete(h, "operation_class") }, "operation_class"},
		{"1", func(h map[string]any) { h["operation_class"] = "other" }, "operation_class"},
		{"1", func(h map[string]any) { h["target_id"] = "a..b" }, "target_id"},
		{"1", func(h map[string]any) { h["target_namespace"] = ".x" }, "target_namespace"},
		{"1", func(h map[string]any) { delete(h, "tenant_id") }, "tenant_id"},
		{"1", func(h map[string]any) { h["actor_name"] = "bad actor" }, "actor_name"},
	}
	for _, c := range cases {
		h := relayHeaders(int64(3), "target_01")
		if c.edit != nil {
			c.edit(h)
		}
		_, err := ParseDelivery(c.id, h)
		var bad *BadDeliveryError
		if !errors.As(err, &bad) || bad.Field != c.field {
			t.Errorf("message %q, headers %v: %v, want bad %s", c.id, h, err, c.field)
		}
	}
	// no trace_id header is fine (a commit that named none)
	h := relayHeaders(int64(3), "target_01")
	delete(h, "trace_id")
	if d := mustParse(t, "1", h); d.TraceID != "" {
		t.Fatalf("trace id %q", d.TraceID)
	}
}
