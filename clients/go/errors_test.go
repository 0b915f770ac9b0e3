package leaseclient

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Every failure code of the closed set decodes to an *Error matching its
// own sentinel and no other one (the wire bodies of docs/api.md).
func TestEveryCodeDecodesToItsSentinel(t *testing.T) {
	codes := map[Code]int{CodeInvalidLeaseRequest: 400, CodeInvalidCredential: 401,
		CodeAccessDenied: 403, CodeLeaseNotFound: 404, CodeDeadlineExceeded: 408,
		CodeLeaseConflict: 409, CodeLeaseLost: 409, CodeIdempotencyConflict: 409,
		CodeWriteConflict: 409, CodeLeaseRateLimited: 429, CodeLeaseBackendUnavailable: 503,
		CodeLeaseOutcomeUnknown: 503}
	all := []error{ErrInvalidLeaseRequest, ErrInvalidCredential, ErrAccessDenied, ErrLeaseNotFound,
		ErrDeadlineExceeded, ErrLeaseConflict, ErrLeaseLost, ErrIdempotencyConflict,
		ErrWriteConflict, ErrLeaseRateLimited, ErrLeaseBackendUnavailable, ErrLeaseOutcomeUnknown}
	for code, status := range codes {
		body := fmt.Sprintf(`{"status":"error","code":%q,"msg":"m","correlation_id":"corr_x",`+
			`"retryable":true,"retry_after_ms":250,"field":"writes[0].expected_revision","current_revision":0}`, code)
		_, typed, ok := decodeAnswer(status, []byte(body))
		if !ok || typed == nil {
			t.Fatalf("%s: not decoded", code)
		}
		var err error = fmt.Errorf("wrapped: %w", typed)
		for _, s := range all {
			if got, want := errors.Is(err, s), s == Sentinel(code); got != want {
				t.Errorf("%s: errors.Is(%v) = %v", code, s, got)
			}
		}
		var e *Error
		if !errors.As(err, &e) || e.HTTPStatus != status || e.RetryAfter.Milliseconds() != 250 ||
			!e.HasCurrentRevision || e.CurrentRevision != 0 || e.CorrelationID != "corr_x" {
			t.Errorf("%s: details %+v", code, e)
		}
	}
	if Sentinel("lease_acquired") != nil {
		t.Fatal("a success code has no sentinel")
	}
}

func TestUntypedAnswerIsNotAnEnvelope(t *testing.T) {
	for _, body := range []string{"", "<html>bad gateway</html>", `{"status":"error"}`, `{"code":"x"}`} {
		if _, _, ok := decodeAnswer(502, []byte(body)); ok {
			t.Errorf("%q decoded as an envelope", body)
		}
	}
}

func TestClientMadeErrorsKeepTheirCause(t *testing.T) {
	c := New("http://127.0.0.1:1", "lsk_x", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Inspect(ctx, "lease_1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	// port 1: refused before anything was sent; a mutation too is
	// backend_unavailable (nothing can have happened), never outcome unknown
	_, err := c.Acquire(context.Background(), &AcquireRequest{Identity: Identity{TenantID: "t"}})
	var e *Error
	if !errors.Is(err, ErrLeaseBackendUnavailable) || !errors.As(err, &e) || !e.ClientMade || e.RequestID == "" {
		t.Fatalf("refused connection: %v", err)
	}
}
