package attempt_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookline/hookline/attempt"
)

func fixed(v float64) func() float64 { return func() float64 { return v } }

func TestScheduleNext(t *testing.T) {
	planned := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		schedule   attempt.Schedule
		attempt    int
		now        time.Time
		retryAfter time.Duration
		rnd        float64
		want       time.Duration // delay after now
		wantOK     bool
	}{
		{name: "first retry half window", attempt: 1, now: planned, rnd: 0.5, want: 2500 * time.Millisecond, wantOK: true},
		{name: "zero jitter retries now", attempt: 1, now: planned, rnd: 0, want: 0, wantOK: true},
		{name: "second doubles", attempt: 2, now: planned, rnd: 0.5, want: 5 * time.Second, wantOK: true},
		{name: "tenth", attempt: 10, now: planned, rnd: 0.5, want: 1280 * time.Second, wantOK: true},
		{name: "capped at one hour", attempt: 11, now: planned, rnd: 0.5, want: 30 * time.Minute, wantOK: true},
		{name: "cap with no overflow", schedule: attempt.Schedule{MaxAttempts: 500}, attempt: 200, now: planned, rnd: 0.5, want: 30 * time.Minute, wantOK: true},
		{name: "retry-after used", attempt: 1, now: planned, retryAfter: 30 * time.Second, rnd: 0.1, want: 30 * time.Second, wantOK: true},
		{name: "retry-after floor one second", attempt: 1, now: planned, retryAfter: 200 * time.Millisecond, rnd: 0, want: time.Second, wantOK: true},
		{name: "retry-after cap one hour", attempt: 1, now: planned, retryAfter: 5 * time.Hour, rnd: 0, want: time.Hour, wantOK: true},
		{name: "backoff above retry-after", attempt: 11, now: planned, retryAfter: 10 * time.Second, rnd: 0.5, want: 30 * time.Minute, wantOK: true},
		{name: "last allowed attempt", attempt: 14, now: planned, rnd: 0.5, want: 30 * time.Minute, wantOK: true},
		{name: "max attempts reached", attempt: 15, now: planned, rnd: 0.5, wantOK: false},
		{name: "custom max attempts", schedule: attempt.Schedule{MaxAttempts: 3}, attempt: 3, now: planned, rnd: 0.5, wantOK: false},
		{name: "custom base and cap", schedule: attempt.Schedule{Base: time.Second, Cap: 4 * time.Second}, attempt: 5, now: planned, rnd: 0.5, want: 2 * time.Second, wantOK: true},
		{name: "deadline reached", attempt: 3, now: planned.Add(24 * time.Hour), rnd: 0.5, wantOK: false},
		{name: "past deadline", attempt: 3, now: planned.Add(25 * time.Hour), rnd: 0.5, wantOK: false},
		{name: "cut to deadline", attempt: 12, now: planned.Add(24*time.Hour - 10*time.Minute), rnd: 0.9, want: 10 * time.Minute, wantOK: true},
		{name: "retry-after past deadline", attempt: 2, now: planned.Add(24*time.Hour - 10*time.Minute), retryAfter: 20 * time.Minute, rnd: 0, wantOK: false},
		{name: "custom deadline", schedule: attempt.Schedule{Deadline: time.Hour}, attempt: 2, now: planned.Add(time.Hour), rnd: 0, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, ok := tt.schedule.Next(tt.attempt, planned, tt.now, tt.retryAfter, fixed(tt.rnd))
			if ok != tt.wantOK {
				t.Fatalf("Next ok = %v (next %v), want %v", ok, next, tt.wantOK)
			}
			if !ok {
				return
			}
			if got := next.Sub(tt.now); got != tt.want {
				t.Errorf("Next delay = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSchedulePlan: Plan gives Next's decision with its reasons: the
// window and the delay drawn from it, the Retry-After as clamped, the cut
// to the deadline, and why it stopped.
func TestSchedulePlan(t *testing.T) {
	planned := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		schedule   attempt.Schedule
		attempt    int
		now        time.Time
		retryAfter time.Duration
		rnd        float64
		want       attempt.Retry // all but Next, which is now+delay unless it stopped
		delay      time.Duration
	}{
		{name: "backoff", attempt: 2, now: planned, rnd: 0.5, delay: 5 * time.Second,
			want: attempt.Retry{Window: 10 * time.Second, Backoff: 5 * time.Second}},
		{name: "retry-after honoured", attempt: 1, now: planned, retryAfter: 30 * time.Second, rnd: 0.1, delay: 30 * time.Second,
			want: attempt.Retry{Window: 5 * time.Second, Backoff: 500 * time.Millisecond, RetryAfter: 30 * time.Second}},
		{name: "retry-after raised", attempt: 1, now: planned, retryAfter: 200 * time.Millisecond, delay: time.Second,
			want: attempt.Retry{Window: 5 * time.Second, RetryAfter: time.Second}},
		{name: "retry-after capped", attempt: 1, now: planned, retryAfter: 5 * time.Hour, delay: time.Hour,
			want: attempt.Retry{Window: 5 * time.Second, RetryAfter: time.Hour}},
		{name: "cut to deadline", attempt: 12, now: planned.Add(24*time.Hour - 10*time.Minute), rnd: 0.9, delay: 10 * time.Minute,
			want: attempt.Retry{Window: time.Hour, Backoff: 54 * time.Minute, AtDeadline: true}},
		{name: "max attempts", attempt: 15, now: planned, rnd: 0.5, want: attempt.Retry{Stop: attempt.StopMaxAttempts}},
		{name: "deadline", attempt: 3, now: planned.Add(24 * time.Hour), want: attempt.Retry{Stop: attempt.StopDeadline}},
		{name: "retry-after past deadline", attempt: 2, now: planned.Add(24*time.Hour - 10*time.Minute), retryAfter: 20 * time.Minute,
			want: attempt.Retry{Stop: attempt.StopRetryAfter, Window: 10 * time.Second, RetryAfter: 20 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.schedule.Plan(tt.attempt, planned, tt.now, tt.retryAfter, fixed(tt.rnd))
			want := tt.want
			if want.Stop == attempt.StopNone {
				want.Next = tt.now.Add(tt.delay)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
			next, ok := tt.schedule.Next(tt.attempt, planned, tt.now, tt.retryAfter, fixed(tt.rnd))
			if !next.Equal(got.Next) || ok != (got.Stop == attempt.StopNone) {
				t.Errorf("Next = %v, %v; Plan = %v, %v: they disagree", next, ok, got.Next, got.Stop)
			}
		})
	}
}

func TestScheduleNextDefaultRandom(t *testing.T) {
	var s attempt.Schedule
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for n := 1; n < attempt.DefaultMaxAttempts; n++ {
		window := min(attempt.DefaultBase<<(n-1), attempt.DefaultCap)
		for range 50 {
			next, ok := s.Next(n, now, now, 0, nil)
			if !ok {
				t.Fatalf("attempt %d: ok=false", n)
			}
			if d := next.Sub(now); d < 0 || d >= window {
				t.Fatalf("attempt %d: delay %v outside [0, %v)", n, d, window)
			}
		}
	}
}

func TestScheduleValidate(t *testing.T) {
	tests := []struct {
		name string
		s    attempt.Schedule
		ok   bool
	}{
		{"zero", attempt.Schedule{}, true},
		{"custom", attempt.Schedule{Base: time.Second, Cap: time.Minute, Deadline: time.Hour, MaxAttempts: 5}, true},
		{"negative", attempt.Schedule{Base: -time.Second}, false},
		{"cap below base", attempt.Schedule{Base: time.Minute, Cap: time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.s.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
