package endpoint_test

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/tracing"
)

// traceSeen records the traceparent of every request, by webhook-id.
type traceSeen struct {
	mu   sync.Mutex // guards seen
	seen map[string][]string
}

func (s *traceSeen) note(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.Header.Get("webhook-id")
	s.seen[id] = append(s.seen[id], r.Header.Get("traceparent")+" "+r.Header.Get("tracestate"))
}

func (s *traceSeen) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen[id]...)
}

// attemptsOf returns the Attempt of every outcome on a delivery stream.
func attemptsOf(evs []proto.Message) []*hooklinev1.Attempt {
	var out []*hooklinev1.Attempt
	for _, e := range evs {
		switch e := e.(type) {
		case *hooklinev1.AttemptSucceeded:
			out = append(out, e.GetAttempt())
		case *hooklinev1.AttemptFailed:
			out = append(out, e.GetAttempt())
		}
	}
	return out
}

// waitAttempts polls a delivery stream until it holds n outcomes and
// returns their attempts.
func (b *bench) waitAttempts(id string, n int) []*hooklinev1.Attempt {
	b.t.Helper()
	var got []*hooklinev1.Attempt
	waitUntil(b.t, "attempts recorded", func() bool {
		got = attemptsOf(b.delivery(id))
		return len(got) >= n
	})
	return got
}

// publishTraced is bench.publish with the producer's trace context.
func (b *bench) publishTraced(tenant, eventID, endpointID, traceparent, tracestate string) string {
	b.t.Helper()
	pub, plan := b.event(tenant, eventID, endpointID)
	pub.Traceparent, pub.Tracestate = traceparent, tracestate
	return b.append(pub, plan)[0]
}

// TestAttemptLineage: each attempt of a delivery records why it happened
// (the scheduled first attempt, automatic retries 1 and 2, a manual replay
// by its caller), what the failure decided (the Retry-After honoured, the
// backoff drawn), the digest of the exact body sent, and the traceparent it
// carried: the receiver saw exactly that one, a new span of the event's
// own trace each time.
func TestAttemptLineage(t *testing.T) {
	b := newBench(t)
	seen := &traceSeen{seen: map[string][]string{}}
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		seen.note(r)
		switch n {
		case 1:
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
		case 3:
			w.WriteHeader(http.StatusBadRequest)
		default:
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	})
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	id := b.publish("acme", "inv_1", "ep_1")[0]
	payload := []byte(`{"invoice":"inv_1"}`)
	planned := b.clk.Now()

	a := b.waitAttempts(id, 1)[0]
	if tr := a.GetTrigger(); tr.GetKind() != hooklinev1.AttemptTrigger_KIND_SCHEDULED || !tr.GetDueAt().AsTime().Equal(planned) {
		t.Fatalf("attempt 1 trigger %v; want SCHEDULED, due at the planned time %v", tr, planned)
	}
	r := a.GetRetry()
	if r.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_SCHEDULED || r.GetRetryAfter() != hooklinev1.RetryDecision_RETRY_AFTER_HONOURED ||
		r.GetRetryAfterMs() != 20_000 || r.GetRetryAfterAppliedMs() != 20_000 || r.GetBackoffWindowMs() != 5_000 || r.GetBackoffMs() != 2_500 ||
		!r.GetNextAttemptAt().AsTime().Equal(a.GetStartedAt().AsTime().Add(20*time.Second)) {
		t.Fatalf("attempt 1 retry decision %v; want the Retry-After of 20 s honoured over a 2.5 s backoff", r)
	}
	b.advance(20 * time.Second)
	a = b.waitAttempts(id, 2)[1]
	if tr := a.GetTrigger(); tr.GetKind() != hooklinev1.AttemptTrigger_KIND_RETRY || tr.GetRetry() != 1 || !tr.GetDueAt().AsTime().Equal(planned.Add(20*time.Second)) {
		t.Fatalf("attempt 2 trigger %v; want automatic retry 1, due 20 s after the plan", tr)
	}
	if r := a.GetRetry(); r.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_SCHEDULED || r.GetRetryAfter() != hooklinev1.RetryDecision_RETRY_AFTER_NONE ||
		r.GetBackoffWindowMs() != 10_000 || r.GetBackoffMs() != 5_000 {
		t.Fatalf("attempt 2 retry decision %v; want a 5 s backoff drawn from 10 s", r)
	}
	b.advance(5 * time.Second)
	a = b.waitAttempts(id, 3)[2]
	if tr := a.GetTrigger(); tr.GetKind() != hooklinev1.AttemptTrigger_KIND_RETRY || tr.GetRetry() != 2 {
		t.Fatalf("attempt 3 trigger %v; want automatic retry 2", tr)
	}
	if r := a.GetRetry(); r.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_PERMANENT {
		t.Fatalf("attempt 3 (400) retry decision %v; want PERMANENT", r)
	}
	b.waitStatus("acme", history.Failed, id)

	by := &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_API_KEY, Id: "key_ops"}
	c := cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: id})
	c.IssuedBy, c.RequestId = by, "req_lineage"
	mustOK(t, ask(t, b.sys, pid, c))
	as := b.waitAttempts(id, 4)
	if tr := as[3].GetTrigger(); tr.GetKind() != hooklinev1.AttemptTrigger_KIND_REPLAY || tr.GetRequestedBy().GetId() != "key_ops" ||
		tr.GetRequestId() != "req_lineage" || tr.GetDueAt() == nil {
		t.Fatalf("attempt 4 trigger %v; want a replay by key_ops (req_lineage)", tr)
	}
	if as[3].GetRetry() != nil || as[3].GetHttpStatus() != http.StatusOK || as[3].GetResponseBytes() != int64(len(`{"ok":true}`)) {
		t.Fatalf("attempt 4: %v; want a 200 with its 11-byte body and no retry decision", as[3])
	}

	sum := sha256.Sum256(payload)
	own := tracing.EventTraceID("acme", "inv_1")
	spans := map[tracing.SpanID]bool{}
	got := seen.of(id)
	for i, a := range as {
		if !bytes.Equal(a.GetBodySha256(), sum[:]) || a.GetBodyBytes() != int64(len(payload)) {
			t.Errorf("attempt %d body %x (%d bytes); want the payload's %x", i+1, a.GetBodySha256(), a.GetBodyBytes(), sum)
		}
		tp := a.GetTrace().GetTraceparent()
		c, err := tracing.Parse(tp)
		if err != nil || c.TraceID != own || a.GetTrace().GetParentSpanId() != "" || c.Sampled() {
			t.Errorf("attempt %d trace %v (%v); want the event's own trace %v, unsampled (no exporter), no parent", i+1, a.GetTrace(), err, own)
		}
		spans[c.SpanID] = true
		if got[i] != tp+" " {
			t.Errorf("attempt %d: the receiver saw traceparent %q; the lineage says %q", i+1, got[i], tp)
		}
		if w := a.GetWaits(); w == nil || w.GetTotalMs() != 0 {
			t.Errorf("attempt %d waits %v; want none (the clock stood still)", i+1, w)
		}
	}
	if len(spans) != len(as) {
		t.Errorf("%d span ids over %d attempts; want one each", len(spans), len(as))
	}
}

// TestAttemptTraceChild: an event published with a traceparent gives each
// attempt a child span in the producer's trace, its flags and tracestate
// passed on; the lineage names the producer's span as the parent.
func TestAttemptTraceChild(t *testing.T) {
	const producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	b := newBench(t)
	seen := &traceSeen{seen: map[string][]string{}}
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) { seen.note(r) })
	b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	id := b.publishTraced("acme", "inv_t", "ep_1", producer, "rojo=00f067aa0ba902b7")
	a := b.waitAttempts(id, 1)[0]
	c, err := tracing.Parse(a.GetTrace().GetTraceparent())
	if err != nil || c.TraceID.String() != "4bf92f3577b34da6a3ce929d0e0e4736" || c.SpanID.String() == "00f067aa0ba902b7" || !c.Sampled() ||
		a.GetTrace().GetParentSpanId() != "00f067aa0ba902b7" {
		t.Fatalf("trace %v (%v); want a new sampled span of the producer's trace, child of 00f067aa0ba902b7", a.GetTrace(), err)
	}
	if got := seen.of(id); len(got) != 1 || got[0] != a.GetTrace().GetTraceparent()+" rojo=00f067aa0ba902b7" {
		t.Fatalf("the receiver saw %q; want the lineage's traceparent and the producer's tracestate", got)
	}
}

// TestAttemptWaitsRateLimit: a delivery held by the endpoint's token
// bucket records the time it waited for it, and nothing else.
func TestAttemptWaitsRateLimit(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusOK))
	b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.RatePerSecond, s.Burst = 1, 1 })
	first := b.publish("acme", "inv_1", "ep_1")[0]
	b.waitStatus("acme", history.Succeeded, first)
	second := b.publish("acme", "inv_2", "ep_1")[0]
	// The bucket holds the second until the clock has moved a second: move
	// it 50 ms at a time until it is attempted.
	waitUntil(t, "the second delivery attempted", func() bool {
		if len(attemptsOf(b.delivery(second))) > 0 {
			return true
		}
		b.advance(50 * time.Millisecond)
		return false
	})
	w := b.waitAttempts(second, 1)[0].GetWaits()
	if w.GetRateLimitMs() <= 0 || w.GetRateLimitMs() > 1000 || w.GetRateLimitMs() != w.GetTotalMs() ||
		w.GetTenantQuotaMs()+w.GetBreakerMs()+w.GetInFlightMs()+w.GetSlotMs() != 0 {
		t.Fatalf("waits %v; want all of its wait (at most 1 s) on the rate limit", w)
	}
	t.Logf("waits of the second delivery: %v", w)
}
