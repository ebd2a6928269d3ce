package endpoint

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestHolds: the periods a reason held the endpoint add up per reason; the
// waits of a flight are what accrued between two readings.
func TestHolds(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var h holds
	h.set(at(0), holdNone)
	ready := h.at(at(0))
	h.set(at(100), holdQuota)
	h.set(at(100), holdQuota) // the same reason again: one period
	h.set(at(400), holdRate)
	h.set(at(400), holdNone) // a pump starts over: nothing lost
	h.set(at(400), holdRate)
	h.set(at(1400), holdBreaker)
	l := flightLineage{held: ready}
	w := l.heldSince(h.at(at(1500)))
	if w.TenantQuotaMs != 300 || w.RateLimitMs != 1000 || w.BreakerMs != 100 || w.InFlightMs != 0 {
		t.Fatalf("waits %v; want quota 300, rate 1000, breaker 100 (still open)", w)
	}
	// A flight ready later sees only what held after it.
	later := flightLineage{held: h.at(at(1450))}
	if w := later.heldSince(h.at(at(1500))); w.BreakerMs != 50 || w.RateLimitMs != 0 || w.TenantQuotaMs != 0 {
		t.Fatalf("waits of a later flight %v; want breaker 50 alone", w)
	}
}

func TestRetryAfterSeen(t *testing.T) {
	tests := []struct {
		name   string
		status int
		after  time.Duration
		has    bool
		want   hooklinev1.RetryDecision_RetryAfter
	}{
		{name: "none", status: 503, want: hooklinev1.RetryDecision_RETRY_AFTER_NONE},
		{name: "honoured", status: 503, after: 30 * time.Second, has: true, want: hooklinev1.RetryDecision_RETRY_AFTER_HONOURED},
		{name: "429 honoured", status: 429, after: time.Hour, has: true, want: hooklinev1.RetryDecision_RETRY_AFTER_HONOURED},
		{name: "raised", status: 429, after: 0, has: true, want: hooklinev1.RetryDecision_RETRY_AFTER_RAISED},
		{name: "capped", status: 503, after: 2 * time.Hour, has: true, want: hooklinev1.RetryDecision_RETRY_AFTER_CAPPED},
		{name: "ignored on a 500", status: 500, after: 30 * time.Second, has: true, want: hooklinev1.RetryDecision_RETRY_AFTER_IGNORED},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := attempt.Outcome{Status: tc.status, RetryAfter: tc.after, HasRetryAfter: tc.has}
			if got := retryAfterSeen(o); got != tc.want {
				t.Fatalf("retryAfterSeen = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestRetryDecision: the decision explains the schedule's plan: the drawn
// backoff, the Retry-After as applied, the cut to the deadline, and why
// no retry follows.
func TestRetryDecision(t *testing.T) {
	planned := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	deadline := planned.Add(24 * time.Hour)
	half := func() float64 { return 0.5 }
	tests := []struct {
		name       string
		attempt    int
		now        time.Time
		o          attempt.Outcome
		outcome    hooklinev1.RetryDecision_Outcome
		retryAfter hooklinev1.RetryDecision_RetryAfter
		next       time.Duration // after now; 0: none
		window     time.Duration
		backoff    time.Duration
		applied    time.Duration
		reason     string
	}{
		{name: "backoff", attempt: 2, now: planned, o: attempt.Outcome{Status: http.StatusInternalServerError},
			outcome: hooklinev1.RetryDecision_OUTCOME_SCHEDULED, retryAfter: hooklinev1.RetryDecision_RETRY_AFTER_NONE,
			next: 5 * time.Second, window: 10 * time.Second, backoff: 5 * time.Second, reason: "backoff of 5s drawn from [0, 10s)"},
		{name: "retry-after honoured", attempt: 1, now: planned,
			o:       attempt.Outcome{Status: http.StatusServiceUnavailable, RetryAfter: 30 * time.Second, HasRetryAfter: true},
			outcome: hooklinev1.RetryDecision_OUTCOME_SCHEDULED, retryAfter: hooklinev1.RetryDecision_RETRY_AFTER_HONOURED,
			next: 30 * time.Second, window: 5 * time.Second, backoff: 2500 * time.Millisecond, applied: 30 * time.Second, reason: "Retry-After of 30s (honoured)"},
		{name: "retry-after capped", attempt: 1, now: planned,
			o:       attempt.Outcome{Status: http.StatusTooManyRequests, RetryAfter: 5 * time.Hour, HasRetryAfter: true},
			outcome: hooklinev1.RetryDecision_OUTCOME_SCHEDULED, retryAfter: hooklinev1.RetryDecision_RETRY_AFTER_CAPPED,
			next: time.Hour, window: 5 * time.Second, backoff: 2500 * time.Millisecond, applied: time.Hour, reason: "(capped at 1h)"},
		{name: "retry-after below the backoff", attempt: 12, now: planned,
			o:       attempt.Outcome{Status: http.StatusServiceUnavailable, RetryAfter: 2 * time.Second, HasRetryAfter: true},
			outcome: hooklinev1.RetryDecision_OUTCOME_SCHEDULED, retryAfter: hooklinev1.RetryDecision_RETRY_AFTER_HONOURED,
			next: 30 * time.Minute, window: time.Hour, backoff: 30 * time.Minute, applied: 2 * time.Second, reason: "backoff of 30m0s drawn from [0, 1h0m0s), above the receiver's Retry-After of 2s (honoured)"},
		{name: "max attempts", attempt: 15, now: planned,
			o:       attempt.Outcome{Status: http.StatusServiceUnavailable, RetryAfter: time.Second, HasRetryAfter: true},
			outcome: hooklinev1.RetryDecision_OUTCOME_MAX_ATTEMPTS, retryAfter: hooklinev1.RetryDecision_RETRY_AFTER_NOT_APPLIED,
			reason: "15 attempts allowed are used up"},
		{name: "retry-after past the deadline", attempt: 3, now: deadline.Add(-time.Minute),
			o:       attempt.Outcome{Status: http.StatusServiceUnavailable, RetryAfter: 10 * time.Minute, HasRetryAfter: true},
			outcome: hooklinev1.RetryDecision_OUTCOME_DEADLINE, retryAfter: hooklinev1.RetryDecision_RETRY_AFTER_HONOURED,
			window: 20 * time.Second, backoff: 10 * time.Second, applied: 10 * time.Minute, reason: "points past the delivery's deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s attempt.Schedule
			plan := s.Plan(tc.attempt, planned, tc.now, tc.o.RetryDelay(), half)
			d := retryDecision(tc.o, plan, attempt.DefaultMaxAttempts, deadline)
			if d.GetOutcome() != tc.outcome || d.GetRetryAfter() != tc.retryAfter {
				t.Fatalf("decision %v / %v; want %v / %v (%s)", d.GetOutcome(), d.GetRetryAfter(), tc.outcome, tc.retryAfter, d.GetReason())
			}
			var next time.Time
			if tc.next > 0 {
				next = tc.now.Add(tc.next)
			}
			if got := asTime(d.GetNextAttemptAt()); !got.Equal(next) {
				t.Errorf("next %v; want %v", got, next)
			}
			if d.GetBackoffWindowMs() != tc.window.Milliseconds() || d.GetBackoffMs() != tc.backoff.Milliseconds() || d.GetRetryAfterAppliedMs() != tc.applied.Milliseconds() {
				t.Errorf("window %d ms, backoff %d ms, Retry-After applied %d ms; want %v, %v, %v",
					d.GetBackoffWindowMs(), d.GetBackoffMs(), d.GetRetryAfterAppliedMs(), tc.window, tc.backoff, tc.applied)
			}
			if tc.o.HasRetryAfter && d.GetRetryAfterMs() != tc.o.RetryAfter.Milliseconds() {
				t.Errorf("Retry-After as sent %d ms; want %v", d.GetRetryAfterMs(), tc.o.RetryAfter)
			}
			if !strings.Contains(d.GetReason(), tc.reason) {
				t.Errorf("reason %q; want it to say %q", d.GetReason(), tc.reason)
			}
		})
	}
}

func TestManualAndPermanentDecisions(t *testing.T) {
	next := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	busy := attempt.Outcome{Status: http.StatusServiceUnavailable, RetryAfter: time.Minute, HasRetryAfter: true}
	if d := manualDecision(busy, false, time.Time{}); d.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_MANUAL || d.GetNextAttemptAt() != nil ||
		d.GetRetryAfter() != hooklinev1.RetryDecision_RETRY_AFTER_NOT_APPLIED {
		t.Errorf("a failed replay of an ended delivery: %v", d)
	}
	if d := manualDecision(busy, false, next); d.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_KEPT || !asTime(d.GetNextAttemptAt()).Equal(next) {
		t.Errorf("a failed replay while retries were pending: %v", d)
	}
	if d := manualDecision(busy, true, time.Time{}); d.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_DEADLINE {
		t.Errorf("a failed replay past the deadline: %v", d)
	}
	if d := permanentDecision(attempt.Outcome{Status: http.StatusBadRequest}); d.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_PERMANENT ||
		!strings.Contains(d.GetReason(), "HTTP 400") {
		t.Errorf("a 400: %v", d)
	}
}
