package leaseclient

import (
	"context"
	"errors"
)

// heldLeaseKey is the key under which a Lease's Context carries the lease.
type heldLeaseKey struct{}

// leaseEnded is the cause of a call cut short because the lease it ran
// for ended: errors.Is and errors.As see the lease's end (ErrLeaseLost, a
// *LostError, ErrReleased), Unwrap gives the context's error
// (context.Canceled), so the code doing the work tells a lost lease from its own
// cancellation and still sees that its context ended.
type leaseEnded struct {
	end    error // the lease's Err(): a *LostError or ErrReleased
	cause  error // the call's context's error
	detail error // what the call itself failed with, when it says more
}

func (e *leaseEnded) Error() string {
	s := "the lease ended"
	if e.end != nil {
		s = e.end.Error()
	}
	if e.detail != nil {
		s += ": " + e.detail.Error()
	} else if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *leaseEnded) Unwrap() error { return e.cause }

func (e *leaseEnded) Is(target error) bool {
	return target == ErrLeaseLost || (e.end != nil && errors.Is(e.end, target))
}

func (e *leaseEnded) As(target any) bool { return e.end != nil && errors.As(e.end, target) }

// endedError is err, a call's failure under ctx, said as the lease's end
// when the call failed because its context was cancelled and this lease
// has ended (lost, or released by its holder): an *Error of code lease_lost
// (ClientMade, nothing sent, or nothing answered for a read), or, for a
// mutation that may have been sent, the lease_outcome_unknown *Error with
// the lease's end as its cause (it matches ErrLeaseLost too, and its
// RequestID still resolves it). Any other failure is returned as it is.
func (l *HeldLease) endedError(ctx context.Context, err error) error {
	var e *Error
	clientMade := errors.As(err, &e) && e.ClientMade
	if err == nil || !errors.Is(ctx.Err(), context.Canceled) ||
		!(clientMade || errors.Is(err, context.Canceled)) {
		return err
	}
	end := l.Err()
	if end == nil {
		return err // the caller's own cancellation: the lease is still held
	}
	if errors.Is(err, ErrLeaseLost) {
		return err // already said
	}
	if clientMade && e.Code == CodeLeaseOutcomeUnknown {
		e.Err = &leaseEnded{end: end, cause: ctx.Err(), detail: e.Err}
		return e
	}
	out := &Error{Code: CodeLeaseLost, ClientMade: true,
		Message: "lease " + l.ID() + " ended before the call did",
		Err:     &leaseEnded{end: end, cause: ctx.Err(), detail: err}}
	if clientMade {
		out.RequestID = e.RequestID
	}
	return out
}
