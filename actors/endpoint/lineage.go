package endpoint

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/tracing"
)

// The lineage of an attempt.
//
// Every outcome event records, in its Attempt, why the attempt happened
// and how (issue 14): its trigger (the scheduled first attempt, automatic
// retry n, a manual replay and who asked for it, a recovery job), what
// held it once it was ready (the endpoint's in-flight limit, the tenant's
// quota lease, the breaker, the token bucket, and then a slot of the
// node's dispatcher), its W3C trace context, the digests of the body sent
// and of the response (actors/attempt), and what its failure decided about
// the next attempt (the backoff drawn, the receiver's Retry-After as
// honoured, raised or capped, or why no retry follows). The secret
// versions that signed it were recorded already.
//
// It all comes from what the grain holds when it records the outcome: the
// flight's streams (read anyway) and clock readings as the flight moves
// through the limits. Nothing reads the log or blocks: per attempt, a few
// clock readings, a span id and the body's SHA-256.
//
// Waits. The limits are checked in order for the next ready flight in
// line; holds remembers which one held the endpoint, and since when, and
// adds each period up. A flight notes those totals when it becomes ready
// and again when the limits let it through (its slot is asked): the
// difference, per limit, is how long that limit held the endpoint while
// the flight waited its turn. A flight behind others is held by the same
// limit as they are: a token bucket of 1/s makes the fifth of five ready
// flights wait about 4 s of rate limit. The slot wait runs from its ask to
// its start. Slots are not bound to flights (a new delivery may take the
// slot a retry asked for), so for a flight that starts on a slot asked
// while another was in line, the waits are counted up to its start.

// holdReason is what holds the endpoint's next attempt in line.
type holdReason uint8

const (
	holdNone holdReason = iota
	holdInFlight
	holdQuota
	holdBreaker
	holdRate
	numHolds
)

// holds adds up, per reason, how long the endpoint's attempts were held.
// It is owned by the actor, like the loop.
type holds struct {
	reason holdReason
	since  time.Time
	total  [numHolds]time.Duration
}

// set records that from now on r holds the endpoint (holdNone: nothing).
func (h *holds) set(now time.Time, r holdReason) {
	if r == h.reason {
		return
	}
	if h.reason != holdNone {
		h.total[h.reason] += max(now.Sub(h.since), 0)
	}
	h.reason, h.since = r, now
}

// at returns the totals as of now, the current period included.
func (h *holds) at(now time.Time) [numHolds]time.Duration {
	t := h.total
	if h.reason != holdNone {
		t[h.reason] += max(now.Sub(h.since), 0)
	}
	return t
}

// flightLineage is what a flight notes of its current attempt on its way
// through the limits.
type flightLineage struct {
	readyAt time.Time
	held    [numHolds]time.Duration // holds.at(readyAt)
	askedAt time.Time               // zero until the limits let it through
	waits   *hooklinev1.AttemptWaits
	trace   tracing.Context
	parent  tracing.SpanID
	traced  bool // trace is set: the request was built
	child   bool // parent is the producer's span
}

// readyLineage notes that f became ready at now: its waits start.
func (g *grain) readyLineage(f *flight, now time.Time) {
	f.lin = flightLineage{readyAt: now, held: g.loop.holds.at(now)}
}

// askedLineage notes that the limits let f through at now: what held it
// is known; its wait for a slot starts.
func (g *grain) askedLineage(f *flight, now time.Time) {
	f.lin.askedAt = now
	f.lin.waits = f.lin.heldSince(g.loop.holds.at(now))
}

// startLineage completes f's waits at its start, now, and gives it the
// trace context its request carries.
func (g *grain) startLineage(f *flight, now time.Time) {
	l := &f.lin
	if l.waits == nil || l.askedAt.IsZero() {
		l.waits, l.askedAt = l.heldSince(g.loop.holds.at(now)), now
	}
	if !l.readyAt.IsZero() {
		l.waits.TotalMs = now.Sub(l.readyAt).Milliseconds()
	}
	l.waits.SlotMs = now.Sub(l.askedAt).Milliseconds()
	ev := f.d.event
	l.trace, l.parent, l.child = tracing.ForAttempt(ev.GetTraceparent(), f.item.TenantID, f.item.EventID, g.cfg.Spans != nil)
	l.traced = true
}

// heldSince is the waits per limit from the totals noted at ready to now.
func (l *flightLineage) heldSince(now [numHolds]time.Duration) *hooklinev1.AttemptWaits {
	d := func(r holdReason) int64 { return (now[r] - l.held[r]).Milliseconds() }
	return &hooklinev1.AttemptWaits{
		InFlightMs: d(holdInFlight), TenantQuotaMs: d(holdQuota), BreakerMs: d(holdBreaker), RateLimitMs: d(holdRate),
	}
}

// traceHeaders are the traceparent and tracestate an attempt of f sends.
func (f *flight) traceHeaders() (traceparent, tracestate string) {
	if !f.lin.traced {
		return "", ""
	}
	if f.lin.child {
		tracestate = f.d.event.GetTracestate()
	}
	return f.lin.trace.String(), tracestate
}

// lineage fills the lineage of an attempt of f whose outcome is o.
func (g *grain) lineage(f *flight, o attempt.Outcome, a *hooklinev1.Attempt) {
	a.Trigger = g.trigger(f)
	a.Waits = f.lin.waits
	a.BodySha256, a.BodyBytes = o.BodySHA256, o.BodyBytes
	a.ResponseBytes, a.ResponseTruncated = o.ResponseBytes, o.ResponseTruncated
	a.HeadersUs = o.Headers.Microseconds()
	if f.lin.traced {
		a.Trace = &hooklinev1.AttemptTrace{Traceparent: f.lin.trace.String()}
		if f.lin.child {
			a.Trace.ParentSpanId = f.lin.parent.String()
		}
	}
}

// trigger says why the attempt of f was made: a replay (of a recovery or
// not), the first automatic attempt, or an automatic retry.
func (g *grain) trigger(f *flight) *hooklinev1.AttemptTrigger {
	if r := f.d.replay; r != nil {
		t := &hooklinev1.AttemptTrigger{
			Kind: hooklinev1.AttemptTrigger_KIND_REPLAY, RequestedBy: r.GetIssuedBy(), RequestId: r.GetRequestId(),
			RecoveryId: r.GetRecoveryId(), DueAt: r.GetAt(),
		}
		if r.GetRecoveryId() != "" {
			t.Kind = hooklinev1.AttemptTrigger_KIND_RECOVERY
		}
		return t
	}
	due := f.item.DueAt
	if !f.d.lastNext.IsZero() {
		due = f.d.lastNext
	}
	if n := f.d.attempts - f.d.manuals - f.d.autosBefore; n > 0 {
		return &hooklinev1.AttemptTrigger{Kind: hooklinev1.AttemptTrigger_KIND_RETRY, Retry: n, DueAt: stamp(due)}
	}
	if !f.item.PlannedAt.IsZero() {
		due = f.item.PlannedAt
	}
	return &hooklinev1.AttemptTrigger{Kind: hooklinev1.AttemptTrigger_KIND_SCHEDULED, DueAt: stamp(due)}
}

// countManual counts a manual attempt of the stream.
func (r *deliveryRead) countManual(a *hooklinev1.Attempt) {
	if a.GetManual() {
		r.manuals++
	}
}

// exportSpans hands the attempts among msgs, now durable, to the
// exporter.
func (g *grain) exportSpans(msgs []proto.Message) {
	if g.cfg.Spans == nil {
		return
	}
	for _, m := range msgs {
		var a *hooklinev1.Attempt
		switch m := m.(type) {
		case *hooklinev1.AttemptSucceeded:
			a = m.GetAttempt()
		case *hooklinev1.AttemptFailed:
			a = m.GetAttempt()
		}
		if a.GetTrace() != nil {
			g.cfg.Spans.Attempted(a)
		}
	}
}

// retryAfterSeen says what the receiver's Retry-After is to the schedule,
// before the schedule decides: none, ignored (not a 429 or 503), or one it
// honours as it is, raised to 1 s or capped at 1 h.
func retryAfterSeen(o attempt.Outcome) hooklinev1.RetryDecision_RetryAfter {
	switch {
	case !o.HasRetryAfter:
		return hooklinev1.RetryDecision_RETRY_AFTER_NONE
	case o.RetryDelay() == 0:
		return hooklinev1.RetryDecision_RETRY_AFTER_IGNORED
	case o.RetryAfter < attempt.MinRetryAfter:
		return hooklinev1.RetryDecision_RETRY_AFTER_RAISED
	case o.RetryAfter > attempt.MaxRetryAfter:
		return hooklinev1.RetryDecision_RETRY_AFTER_CAPPED
	}
	return hooklinev1.RetryDecision_RETRY_AFTER_HONOURED
}

// newDecision starts a decision with what the receiver's Retry-After was.
func newDecision(o attempt.Outcome, outcome hooklinev1.RetryDecision_Outcome) *hooklinev1.RetryDecision {
	d := &hooklinev1.RetryDecision{Outcome: outcome, RetryAfter: retryAfterSeen(o)}
	if o.HasRetryAfter {
		d.RetryAfterMs = o.RetryAfter.Milliseconds()
	}
	return d
}

// notApplied marks a Retry-After that the schedule would have used as not
// applied: the decision did not come from the schedule's backoff.
func notApplied(d *hooklinev1.RetryDecision) {
	if d.RetryAfter != hooklinev1.RetryDecision_RETRY_AFTER_NONE && d.RetryAfter != hooklinev1.RetryDecision_RETRY_AFTER_IGNORED {
		d.RetryAfter = hooklinev1.RetryDecision_RETRY_AFTER_NOT_APPLIED
	}
}

// retryDecision explains the schedule's plan after a retryable failure:
// maxAttempts is the attempts allowed and deadline the delivery's.
func retryDecision(o attempt.Outcome, plan attempt.Retry, maxAttempts int, deadline time.Time) *hooklinev1.RetryDecision {
	d := newDecision(o, hooklinev1.RetryDecision_OUTCOME_SCHEDULED)
	d.BackoffWindowMs, d.BackoffMs = plan.Window.Milliseconds(), plan.Backoff.Milliseconds()
	d.RetryAfterAppliedMs, d.AtDeadline = plan.RetryAfter.Milliseconds(), plan.AtDeadline
	switch plan.Stop {
	case attempt.StopNone:
		d.NextAttemptAt = timestamppb.New(plan.Next)
		switch {
		case plan.AtDeadline:
			d.Reason = fmt.Sprintf("retry at the delivery's deadline %s (the backoff went past it)", plan.Next.UTC().Format(time.RFC3339))
		case plan.RetryAfter > 0 && plan.RetryAfter >= plan.Backoff:
			d.Reason = fmt.Sprintf("retry after the receiver's Retry-After of %v (%s), above the backoff of %v drawn from [0, %v)",
				plan.RetryAfter, retryAfterWord(d.RetryAfter), plan.Backoff.Round(time.Millisecond), plan.Window)
		case plan.RetryAfter > 0:
			d.Reason = fmt.Sprintf("retry after a backoff of %v drawn from [0, %v), above the receiver's Retry-After of %v (%s)",
				plan.Backoff.Round(time.Millisecond), plan.Window, plan.RetryAfter, retryAfterWord(d.RetryAfter))
		default:
			d.Reason = fmt.Sprintf("retry after a backoff of %v drawn from [0, %v)", plan.Backoff.Round(time.Millisecond), plan.Window)
		}
	case attempt.StopMaxAttempts:
		d.Outcome = hooklinev1.RetryDecision_OUTCOME_MAX_ATTEMPTS
		d.Reason = fmt.Sprintf("no retry: the %d attempts allowed are used up", maxAttempts)
	case attempt.StopDeadline:
		d.Outcome = hooklinev1.RetryDecision_OUTCOME_DEADLINE
		d.Reason = fmt.Sprintf("no retry: the delivery's deadline %s has passed", deadline.UTC().Format(time.RFC3339))
	case attempt.StopRetryAfter:
		d.Outcome = hooklinev1.RetryDecision_OUTCOME_DEADLINE
		d.Reason = fmt.Sprintf("no retry: the receiver's Retry-After of %v (%s) points past the delivery's deadline %s",
			plan.RetryAfter, retryAfterWord(d.RetryAfter), deadline.UTC().Format(time.RFC3339))
	}
	if plan.Stop == attempt.StopMaxAttempts || plan.Stop == attempt.StopDeadline {
		notApplied(d)
	}
	return d
}

// manualDecision explains what a failed manual attempt decided: nothing
// (the delivery had ended, or its deadline passed), or the automatic
// retry already scheduled, kept at next.
func manualDecision(o attempt.Outcome, expired bool, next time.Time) *hooklinev1.RetryDecision {
	d := newDecision(o, hooklinev1.RetryDecision_OUTCOME_MANUAL)
	switch {
	case expired:
		d.Outcome, d.Reason = hooklinev1.RetryDecision_OUTCOME_DEADLINE, "no retry: a manual attempt after the delivery's deadline"
	case next.IsZero():
		d.Reason = "no retry: a manual attempt of a delivery that had ended does not restart automatic retries"
	default:
		d.Outcome, d.NextAttemptAt = hooklinev1.RetryDecision_OUTCOME_KEPT, timestamppb.New(next)
		d.Reason = fmt.Sprintf("a manual attempt: the automatic retry keeps its schedule (%s)", next.UTC().Format(time.RFC3339))
	}
	notApplied(d)
	return d
}

// permanentDecision explains why a permanent answer ends the delivery.
func permanentDecision(o attempt.Outcome) *hooklinev1.RetryDecision {
	d := newDecision(o, hooklinev1.RetryDecision_OUTCOME_PERMANENT)
	d.Reason = fmt.Sprintf("no retry: HTTP %d is permanent (3xx and 4xx but 408 and 429)", o.Status)
	return d
}

// endedDecision explains a delivery that ended without an HTTP attempt.
func endedDecision(why string) *hooklinev1.RetryDecision {
	return &hooklinev1.RetryDecision{
		Outcome: hooklinev1.RetryDecision_OUTCOME_PERMANENT, RetryAfter: hooklinev1.RetryDecision_RETRY_AFTER_NONE,
		Reason: "no retry: " + why,
	}
}

func retryAfterWord(v hooklinev1.RetryDecision_RetryAfter) string {
	switch v {
	case hooklinev1.RetryDecision_RETRY_AFTER_RAISED:
		return "raised to 1s"
	case hooklinev1.RetryDecision_RETRY_AFTER_CAPPED:
		return "capped at 1h"
	}
	return "honoured"
}

func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
