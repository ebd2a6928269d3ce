package endpoint

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/tracing"
)

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
// through the limits. Every outcome event records, in its Attempt, why the
// attempt happened (its trigger), what held it once ready (its waits, per
// limit, from holds), its trace context and what its failure decided
// (loop_decision.go): all from what the grain holds, without any read.
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

// ready notes on f's lineage that f became ready at now: its waits start.
func (h *holds) ready(f *flight, now time.Time) {
	f.lin = flightLineage{readyAt: now, held: h.at(now)}
}

// asked notes on f's lineage that the limits let f through at now: what
// held it is known; its wait for a slot starts.
func (h *holds) asked(f *flight, now time.Time) {
	f.lin.askedAt = now
	f.lin.waits = f.lin.heldSince(h.at(now))
}

// started completes f's waits at its start, now, and gives it the trace
// context its request carries (sampled: the node exports spans).
func (h *holds) started(f *flight, now time.Time, sampled bool) {
	fl := &f.lin
	if fl.waits == nil || fl.askedAt.IsZero() {
		fl.waits, fl.askedAt = fl.heldSince(h.at(now)), now
	}
	if !fl.readyAt.IsZero() {
		fl.waits.TotalMs = now.Sub(fl.readyAt).Milliseconds()
	}
	fl.waits.SlotMs = now.Sub(fl.askedAt).Milliseconds()
	ev := f.d.event
	fl.trace, fl.parent, fl.child = tracing.ForAttempt(ev.GetTraceparent(), f.item.TenantID, f.item.EventID, sampled)
	fl.traced = true
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
func (f *flight) lineage(o attempt.Outcome, a *hooklinev1.Attempt) {
	a.Trigger = f.trigger()
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
func (f *flight) trigger() *hooklinev1.AttemptTrigger {
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

// exportSpans hands the attempts among msgs, now durable, to spans (nil:
// the node exports none).
func exportSpans(spans Spans, msgs []proto.Message) {
	if spans == nil {
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
			spans.Attempted(a)
		}
	}
}

func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
