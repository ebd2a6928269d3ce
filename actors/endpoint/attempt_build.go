package endpoint

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// What an attempt of a flight is made of, as plain functions of the
// flight and the endpoint: the request it sends, its name for the node's
// Drain, and the delivery event that records its outcome, with the retry
// it schedules (loop_decision.go says how that was decided).

// runningOf names the attempt that f is about to start at now on endpoint
// id, whose state is st, for the node's Drain: a hand-over lists it for the
// next owner. It has run out of time once the endpoint's attempt timeout
// (at most MaxAttemptTimeout) and the append of its outcome (at most
// ioTimeout) have.
func runningOf(id string, st *State, ioTimeout time.Duration, f *flight, now time.Time) Running {
	timeout := time.Duration(st.Config.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 || timeout > attempt.MaxAttemptTimeout {
		timeout = attempt.MaxAttemptTimeout
	}
	return Running{
		EndpointID: id, DeliveryID: f.item.DeliveryID, Attempt: f.d.attempts + 1,
		Until: now.Add(timeout + ioTimeout),
	}
}

// attemptRequest builds the attempt of f to the endpoint whose state is st: the
// stored bytes, signed with every live secret (the current one included,
// so a replay uses the current secret), its sealed secrets opened with kr.
func attemptRequest(st *State, kr *seal.Keyring, now func() time.Time, f *flight) (attempt.Request, error) {
	secrets, err := st.LiveSecrets(kr)
	if err != nil {
		return attempt.Request{}, err
	}
	seed, err := st.SigningKey(kr)
	if err != nil {
		return attempt.Request{}, err
	}
	headers, err := st.Headers(kr)
	if err != nil {
		return attempt.Request{}, err
	}
	grant, tokenKey, err := st.OAuth2(kr)
	if err != nil {
		return attempt.Request{}, err
	}
	clientTLS, err := st.ClientTLS(kr)
	if err != nil {
		return attempt.Request{}, err
	}
	password, err := st.URLPassword(kr)
	if err != nil {
		return attempt.Request{}, err
	}
	ev := f.d.event
	traceparent, tracestate := f.traceHeaders()
	return attempt.Request{
		URL: st.Config.GetUrl(), URLPassword: password, DeliveryID: f.item.DeliveryID, EventID: f.item.EventID, EventType: f.eventType(),
		OccurredAt: asTime(ev.GetOccurredAt()), SchemaVersion: ev.GetSchemaVersion(),
		OrderingKey: f.item.OrderingKey, Sequence: f.item.Sequence,
		Payload: ev.GetPayload(), ContentType: ev.GetContentType(), Secrets: secrets, SigningKey: seed,
		OAuth2: grant, TokenKey: tokenKey, TLS: clientTLS,
		Headers: headers, HeaderPrefix: st.Config.GetHeaderPrefix(),
		Traceparent: traceparent, Tracestate: tracestate,
		Timeout: time.Duration(st.Config.GetTimeoutMs()) * time.Millisecond, Now: now,
	}, nil
}

// outcomeEvent is the delivery event of an attempt's outcome o on endpoint
// id, whose state is st, numbered after the attempts the flight knows of;
// and the time of the next automatic attempt it schedules (zero: none).
func outcomeEvent(cfg *Config, id string, st *State, f *flight, o attempt.Outcome, now time.Time) (proto.Message, time.Time) {
	n := f.d.attempts + 1
	a := attemptRecord(id, st, f, o, n)
	switch o.Class.(type) {
	case attempt.Success:
		return &hooklinev1.AttemptSucceeded{Attempt: a}, time.Time{}
	case attempt.Retryable:
		failed := &hooklinev1.AttemptFailed{Attempt: a, Retryable: true}
		if o.HasRetryAfter && o.RetryDelay() > 0 {
			failed.RetryAfterMs = o.RetryDelay().Milliseconds()
		}
		// Decided as of the answer (its Retry-After counts from then), not
		// of when the grain got to it: the attempt's record then says
		// next = finished + the delay applied.
		at := now
		if !o.Finished.IsZero() {
			at = o.Finished
		}
		next, decision := nextAttempt(cfg, st, f, n, o, at)
		a.Retry = decision
		if !next.IsZero() {
			failed.NextAttemptAt = timestamppb.New(next)
		}
		return failed, next
	}
	a.Retry = permanentDecision(o)
	return &hooklinev1.AttemptFailed{Attempt: a}, time.Time{}
}

// attemptRecord is the Attempt shared by the outcome events of endpoint
// id, whose state is st.
func attemptRecord(id string, st *State, f *flight, o attempt.Outcome, number int32) *hooklinev1.Attempt {
	a := &hooklinev1.Attempt{
		TenantId: f.item.TenantID, EndpointId: id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
		EventType: f.eventType(), Number: number, Manual: f.d.replay != nil, ConfigVersion: st.ConfigVersion,
		SecretVersions: o.KeyVersions, StartedAt: timestamppb.New(o.Started), FinishedAt: timestamppb.New(o.Finished),
		LatencyUs: o.Latency.Microseconds(), HttpStatus: int32(o.Status), ErrorClass: o.ErrorClass, Error: o.Error,
		ResponseSha256: o.ResponseSHA256, ResponsePrefix: o.ResponsePrefix, ResponseSeal: f.responseSeal,
		IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "delivery"},
		Pulled:   !f.leasedAt.IsZero(), FromArchive: f.d.fromArchive,
	}
	f.orderingOf(a)
	if f.d.replay != nil {
		a.IssuedBy = f.d.replay.GetIssuedBy()
	}
	f.lineage(o, a)
	return a
}

// nextAttempt decides when the delivery's next automatic attempt runs
// after a retryable failure of attempt number n, by the node's schedule
// (cfg) and the endpoint's settings (st); zero means none (the delivery
// ends failed).
//
// A manual attempt never starts automatic retries: when the delivery had
// ended, it stays ended. When automatic retries were still pending, their
// schedule is kept: the retry that was due runs as planned (at once if its
// time has passed), so a failed replay neither delays nor hastens them.
//
// The decision, with how it was reached, goes to the attempt's lineage
// (loop_lineage.go).
func nextAttempt(cfg *Config, st *State, f *flight, n int32, o attempt.Outcome, now time.Time) (time.Time, *hooklinev1.RetryDecision) {
	if f.d.replay != nil {
		if expired := f.expired(now); !f.d.autoPending || expired {
			return time.Time{}, manualDecision(o, expired, time.Time{})
		}
		if !f.d.lastNext.IsZero() {
			next := maxTime(f.d.lastNext, now)
			return next, manualDecision(o, false, next)
		}
	}
	s := cfg.Schedule
	if m := st.Config.GetMaxAttempts(); m > 0 {
		s.MaxAttempts = int(m)
	}
	planned := f.item.PlannedAt
	if planned.IsZero() {
		planned = now
	}
	if exp := f.item.ExpiresAt; !exp.IsZero() && exp.After(planned) {
		s.Deadline = exp.Sub(planned)
	}
	plan := s.Plan(int(n), planned, now, o.RetryDelay(), cfg.Jitter)
	return plan.Next, retryDecision(o, plan, s.MaxAttempts, planned.Add(s.Deadline))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
