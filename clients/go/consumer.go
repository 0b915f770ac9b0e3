package leaseclient

import (
	"container/list"

	"strconv"
	"strings"
	"sync"
)

// Delivery is what a consumer needs from one leased-relay message
// (docs/relay.md, "Messages"): its AMQP message_id (the outbox id) and the
// headers of the lease that wrote it.
type Delivery struct {
	OutboxID     int64
	Identity     Identity // normalised; OperationClass always set
	FencingToken int64
	LeaseID      string
	TraceID      string // "" when the commit named none
}

// Verdict is a Consumer's judgement of a delivery.
type Verdict int

const (
	// VerdictNew: apply it, then Record it (only once the effect is durable).
	VerdictNew Verdict = iota
	// VerdictDuplicate: its message id was recorded; acknowledge and drop it.
	VerdictDuplicate
	// VerdictStale: a higher fencing token of its identity was recorded (a newer
	// holder published); acknowledge and drop it.
	VerdictStale
)

func (v Verdict) String() string {
	switch v {
	case VerdictNew:
		return "new"
	case VerdictDuplicate:
		return "duplicate"
	case VerdictStale:
		return "stale"
	}
	return "unknown"
}

// BadDeliveryError names the message id or header that is missing or
// malformed: the message is not from the relay, or was tampered with.
type BadDeliveryError struct{ Field string }

func (e *BadDeliveryError) Error() string {
	return "leaseclient: not a relay delivery: bad " + e.Field
}

// ParseDelivery reads a delivery from the message id and headers (values
// as the AMQP client gives them: strings, or integers for fencing_token).
// The rules are those of the C helper (src/client/consumer.c): message id
// and fencing_token positive decimals, lease_id (and trace_id when
// present) valid ids, the seven identity headers valid and normalised.
func ParseDelivery(messageID string, headers map[string]any) (Delivery, error) {
	var d Delivery
	var ok bool
	if d.OutboxID, ok = parsePositive(messageID); !ok {
		return d, &BadDeliveryError{"message_id"}
	}
	if d.FencingToken, ok = parsePositive(headerText(headers, "fencing_token")); !ok {
		return d, &BadDeliveryError{"fencing_token"}
	}
	d.LeaseID = headerText(headers, "lease_id")
	if !idValid(d.LeaseID) {
		return d, &BadDeliveryError{"lease_id"}
	}
	if _, has := headers["trace_id"]; has {
		d.TraceID = headerText(headers, "trace_id")
		if !idValid(d.TraceID) {
			return d, &BadDeliveryError{"trace_id"}
		}
	}
	if _, has := headers["operation_class"]; !has {
		return d, &BadDeliveryError{"operation_class"}
	}
	id, bad := NormalizeIdentity(Identity{
		TenantID: headerText(headers, "tenant_id"), ProgramID: headerText(headers, "program_id"),
		TargetNamespace: headerText(headers, "target_namespace"), TargetID: headerText(headers, "target_id"),
		ActorName: headerText(headers, "actor_name"), WorkflowName: headerText(headers, "workflow_name"),
		OperationClass: headerText(headers, "operation_class")})
	if bad != "" {
		return d, &BadDeliveryError{bad}
	}
	d.Identity = id
	return d, nil
}

// headerText is a header as text: strings as they are, integers in decimal
// (AMQP clients decode integer headers as int types); anything else "".
func headerText(h map[string]any, name string) string {
	switch v := h[name].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.FormatInt(int64(v), 10)
	case int8:
		return strconv.FormatInt(int64(v), 10)
	case int16:
		return strconv.FormatInt(int64(v), 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint8:
		return strconv.FormatUint(uint64(v), 10)
	case uint16:
		return strconv.FormatUint(uint64(v), 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	}
	return ""
}

// parsePositive: 1..19 digits, no leading zero, within int64.
func parsePositive(s string) (int64, bool) {
	if s == "" || s[0] == '0' || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Consumer remembers the message ids of the last window recorded
// deliveries and the highest recorded fencing token of each identity.
// Safe for concurrent use. A consumer that restarts, or runs as several
// processes, keeps the same two facts in its own database instead
// (docs/relay.md has the SQL).
type Consumer struct {
	mu     sync.Mutex
	window int
	seen   map[int64]*list.Element
	order  *list.List // recorded ids, oldest first
	tokens map[Identity]int64
}

// NewConsumer remembers window message ids (0: 65536). Choose it larger
// than the number of messages that can arrive between a first delivery and
// its redelivery (a few relay batches).
func NewConsumer(window int) *Consumer {
	if window <= 0 {
		window = 65536
	}
	return &Consumer{window: window, seen: map[int64]*list.Element{}, order: list.New(),
		tokens: map[Identity]int64{}}
}

// Classify judges d and changes nothing. Duplicate is checked before
// stale; equal tokens are one lease's publications and all new.
func (c *Consumer) Classify(d Delivery) Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.seen[d.OutboxID]; dup {
		return VerdictDuplicate
	}
	if max, ok := c.tokens[d.Identity]; ok && d.FencingToken < max {
		return VerdictStale
	}
	return VerdictNew
}

// Record marks d as applied: its message id seen, its token the highest of
// its identity (never lowered). Call it only after the effect is durable,
// so a message whose processing failed is New when it comes again.
func (c *Consumer) Record(d Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max, ok := c.tokens[d.Identity]; !ok || d.FencingToken > max {
		c.tokens[d.Identity] = d.FencingToken
	}
	if _, dup := c.seen[d.OutboxID]; dup {
		return
	}
	if c.order.Len() >= c.window {
		oldest := c.order.Front()
		delete(c.seen, oldest.Value.(int64))
		c.order.Remove(oldest)
	}
	c.seen[d.OutboxID] = c.order.PushBack(d.OutboxID)
}

// NormalizeIdentity validates and normalises an identity as the service
// does (docs/contract.md, "Identity and lock keys"): names and the namespace are
// folded to lower case, target_id keeps its case, operation_class ""
// means "default". bad names the first invalid component ("" when valid).
func NormalizeIdentity(in Identity) (out Identity, bad string) {
	type comp struct {
		name  string
		src   string
		dst   *string
		kind  int
		limit int
	}
	const (
		name = iota
		namespace
		targetID
		opclass
	)
	if in.OperationClass == "" {
		in.OperationClass = "default"
	}
	comps := []comp{
		{"tenant_id", in.TenantID, &out.TenantID, name, 64},
		{"program_id", in.ProgramID, &out.ProgramID, name, 64},
		{"target_namespace", in.TargetNamespace, &out.TargetNamespace, namespace, 64},
		{"target_id", in.TargetID, &out.TargetID, targetID, 128},
		{"actor_name", in.ActorName, &out.ActorName, name, 64},
		{"workflow_name", in.WorkflowName, &out.WorkflowName, name, 64},
		{"operation_class", in.OperationClass, &out.OperationClass, opclass, 16},
	}
	lowerAlnum := func(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }
	alnum := func(c byte) bool { return lowerAlnum(c) || (c >= 'A' && c <= 'Z') }
	for _, c := range comps {
		v := c.src
		if c.kind != targetID {
			v = strings.Map(func(r rune) rune {
				if r >= 'A' && r <= 'Z' {
					return r - 'A' + 'a'
				}
				return r
			}, v)
		}
		if len(v) == 0 || len(v) > c.limit || strings.Contains(v, "..") {
			return Identity{}, c.name
		}
		for i := 0; i < len(v); i++ {
			ch := v[i]
			var okc bool
			switch c.kind {
			case name:
				okc = lowerAlnum(ch) || (i > 0 && (ch == '_' || ch == '-'))
			case namespace:
				okc = lowerAlnum(ch) || (i > 0 && (ch == '_' || ch == '-' || ch == '.'))
			case targetID:
				okc = alnum(ch) || (i > 0 && (ch == '_' || ch == '-' || ch == '.' || ch == ':'))
			case opclass:
				okc = ch >= 'a' && ch <= 'z'
			}
			if !okc {
				return Identity{}, c.name
			}
		}
		if c.kind == opclass {
			switch v {
			case "default", "collect", "enrich", "publish", "maintenance":
			default:
				return Identity{}, c.name
			}
		}
		*c.dst = v
	}
	return out, ""
}

// idValid: 1..128 of [A-Za-z0-9._:-] (request, lease, trace ids).
func idValid(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}
