package leaseclient

import (
	"fmt"
	"time"
)

// Code is a result code of the service's closed set (include/lease/result.h,
// docs/api.md).
type Code string

// The failure codes of the closed set. The seven success codes are in
// Answer.Code.
const (
	CodeInvalidLeaseRequest     Code = "invalid_lease_request"
	CodeInvalidCredential       Code = "invalid_credential"
	CodeAccessDenied            Code = "access_denied"
	CodeLeaseNotFound           Code = "lease_not_found"
	CodeDeadlineExceeded        Code = "deadline_exceeded"
	CodeLeaseConflict           Code = "lease_conflict"
	CodeLeaseLost               Code = "lease_lost"
	CodeIdempotencyConflict     Code = "idempotency_conflict"
	CodeWriteConflict           Code = "write_conflict"
	CodeLeaseRateLimited        Code = "lease_rate_limited"
	CodeLeaseBackendUnavailable Code = "lease_backend_unavailable"
	CodeLeaseOutcomeUnknown     Code = "lease_outcome_unknown"
)

// codeSentinel is the target of errors.Is for one code: every *Error of
// that code matches it.
type codeSentinel struct{ code Code }

func (s *codeSentinel) Error() string { return "leased: " + string(s.code) }

// One sentinel per failure code, for errors.Is:
//
//	if errors.Is(err, leaseclient.ErrLeaseConflict) { ... }
//
// errors.As(err, &e) with e a *Error gives the details (RetryAfter,
// RequestID, Field, CurrentRevision, CorrelationID).
var (
	ErrInvalidLeaseRequest     error = &codeSentinel{CodeInvalidLeaseRequest}
	ErrInvalidCredential       error = &codeSentinel{CodeInvalidCredential}
	ErrAccessDenied            error = &codeSentinel{CodeAccessDenied}
	ErrLeaseNotFound           error = &codeSentinel{CodeLeaseNotFound}
	ErrDeadlineExceeded        error = &codeSentinel{CodeDeadlineExceeded}
	ErrLeaseConflict           error = &codeSentinel{CodeLeaseConflict}
	ErrLeaseLost               error = &codeSentinel{CodeLeaseLost}
	ErrIdempotencyConflict     error = &codeSentinel{CodeIdempotencyConflict}
	ErrWriteConflict           error = &codeSentinel{CodeWriteConflict}
	ErrLeaseRateLimited        error = &codeSentinel{CodeLeaseRateLimited}
	ErrLeaseBackendUnavailable error = &codeSentinel{CodeLeaseBackendUnavailable}
	ErrLeaseOutcomeUnknown     error = &codeSentinel{CodeLeaseOutcomeUnknown}
)

// Sentinel returns the errors.Is target of a code, nil for a code outside
// the closed set.
func Sentinel(c Code) error {
	for _, s := range []error{ErrInvalidLeaseRequest, ErrInvalidCredential, ErrAccessDenied,
		ErrLeaseNotFound, ErrDeadlineExceeded, ErrLeaseConflict, ErrLeaseLost,
		ErrIdempotencyConflict, ErrWriteConflict, ErrLeaseRateLimited,
		ErrLeaseBackendUnavailable, ErrLeaseOutcomeUnknown} {
		if s.(*codeSentinel).code == c {
			return s
		}
	}
	return nil
}

// Error is every failure a call reports: the service's typed answer, or
// (ClientMade) one the client made because no typed answer arrived:
//   - lease_backend_unavailable: leased could not be reached and nothing
//     was sent (nothing can have happened);
//   - lease_outcome_unknown: a mutation was sent and no typed answer came
//     back before the context's deadline. Repeating the same request (same
//     RequestID, same body: pass the same request value again) resolves it;
//   - deadline_exceeded: the context's deadline passed before anything
//     was sent.
type Error struct {
	Code          Code
	HTTPStatus    int    // 0 when ClientMade
	Message       string // the service's stable message, or the client's
	CorrelationID string
	Retryable     bool
	// RetryAfter is the service's retry_after_ms (lease_rate_limited,
	// lease_conflict, lease_backend_unavailable, lease_outcome_unknown).
	RetryAfter time.Duration
	// Field names the offending request field (invalid_lease_request,
	// write_conflict).
	Field string
	// CurrentRevision is the revision found by a write_conflict (0: the
	// document does not exist); HasCurrentRevision says it was given.
	CurrentRevision    int64
	HasCurrentRevision bool
	// RequestID is the mutation's request id ("" for reads): repeat it to
	// resolve lease_outcome_unknown.
	RequestID  string
	ClientMade bool
	Err        error // the transport or context error behind a ClientMade error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("leased: %s", e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.RequestID != "" && e.Code == CodeLeaseOutcomeUnknown {
		s += " (repeat request id " + e.RequestID + " to resolve it)"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrLeaseConflict) etc. true for an *Error of
// that code.
func (e *Error) Is(target error) bool {
	s, ok := target.(*codeSentinel)
	return ok && s.code == e.Code
}
