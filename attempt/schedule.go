package attempt

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Schedule defaults.
const (
	DefaultBase        = 5 * time.Second
	DefaultCap         = time.Hour
	DefaultDeadline    = 24 * time.Hour
	DefaultMaxAttempts = 15

	// MinRetryAfter and MaxRetryAfter bound a receiver's Retry-After.
	MinRetryAfter = time.Second
	MaxRetryAfter = time.Hour
)

// Schedule decides when the next automatic attempt of a delivery runs:
// exponential backoff with full jitter, a receiver's Retry-After as a floor,
// a deadline counted from when the delivery was planned, and a maximum
// number of attempts. The zero value means the defaults: base 5 s, cap 1 h,
// deadline 24 h, 15 attempts. A Schedule is a value and safe for concurrent
// use.
type Schedule struct {
	Base        time.Duration // first backoff window; 0 means DefaultBase
	Cap         time.Duration // largest backoff window; 0 means DefaultCap
	Deadline    time.Duration // no attempt after plannedAt+Deadline; 0 means DefaultDeadline
	MaxAttempts int           // attempts in all, the first included; 0 means DefaultMaxAttempts
}

// Validate reports a negative field or a cap below the base.
func (s Schedule) Validate() error {
	if s.Base < 0 || s.Cap < 0 || s.Deadline < 0 || s.MaxAttempts < 0 {
		return errors.New("attempt: schedule fields must not be negative")
	}
	if s.withDefaults().Cap < s.withDefaults().Base {
		return errors.New("attempt: schedule cap is below its base")
	}
	return nil
}

func (s Schedule) withDefaults() Schedule {
	if s.Base == 0 {
		s.Base = DefaultBase
	}
	if s.Cap == 0 {
		s.Cap = DefaultCap
	}
	if s.Deadline == 0 {
		s.Deadline = DefaultDeadline
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	return s
}

// Next returns when the attempt after attempt number attempt (counted from
// 1) should run, or ok=false when there is none: the delivery then ends
// failed.
//
//   - attempt ≥ MaxAttempts: ok=false.
//   - now at or past plannedAt+Deadline: ok=false.
//   - Otherwise the delay is rand(0, min(Cap, Base·2^(attempt-1))) with rnd,
//     which returns values in [0, 1) (nil means math/rand/v2).
//   - retryAfter > 0 (pass [Outcome.RetryDelay], which is set for 429 and
//     503 only) is clamped to [1 s, 1 h] and is a floor: the delay is never
//     below it.
//   - A backoff delay that would land past the deadline is cut to the
//     deadline, so the last attempt runs at the deadline. A Retry-After that
//     lands past it gives ok=false: the receiver asked us not to come back
//     before then.
func (s Schedule) Next(attempt int, plannedAt, now time.Time, retryAfter time.Duration, rnd func() float64) (time.Time, bool) {
	r := s.Plan(attempt, plannedAt, now, retryAfter, rnd)
	return r.Next, r.Stop == StopNone
}

// Stop says why [Schedule.Plan] scheduled no retry.
type Stop uint8

const (
	// StopNone: a retry is scheduled.
	StopNone Stop = iota
	// StopMaxAttempts: the attempts allowed are used up.
	StopMaxAttempts
	// StopDeadline: the delivery's deadline has passed.
	StopDeadline
	// StopRetryAfter: the receiver's Retry-After points past the deadline.
	StopRetryAfter
)

// Retry is the decision of [Schedule.Plan], with how it was reached: what
// a delivery's lineage shows of it.
type Retry struct {
	// Next is when the next attempt runs; zero when Stop is not StopNone.
	Next time.Time
	Stop Stop
	// Window is the full-jitter window min(Cap, Base·2^(attempt-1)), and
	// Backoff the delay drawn from it (both 0 when stopped before).
	Window, Backoff time.Duration
	// RetryAfter is the Retry-After as applied, clamped to [1 s, 1 h];
	// 0 when none was given.
	RetryAfter time.Duration
	// AtDeadline says the delay was cut to the deadline.
	AtDeadline bool
}

// Plan is [Schedule.Next] with its reasons: the same decision, drawing
// from rnd in the same way.
func (s Schedule) Plan(attempt int, plannedAt, now time.Time, retryAfter time.Duration, rnd func() float64) Retry {
	s = s.withDefaults()
	if attempt >= s.MaxAttempts {
		return Retry{Stop: StopMaxAttempts}
	}
	deadline := plannedAt.Add(s.Deadline)
	if !now.Before(deadline) {
		return Retry{Stop: StopDeadline}
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	window := s.Cap
	if n := attempt - 1; n < 62 {
		if w := s.Base << max(n, 0); w > 0 && w < s.Cap && w>>max(n, 0) == s.Base {
			window = w
		}
	}
	r := Retry{Window: window, Backoff: time.Duration(rnd() * float64(window))}
	delay := r.Backoff
	if retryAfter > 0 {
		r.RetryAfter = min(max(retryAfter, MinRetryAfter), MaxRetryAfter)
		if now.Add(r.RetryAfter).After(deadline) {
			return Retry{Stop: StopRetryAfter, Window: r.Window, Backoff: r.Backoff, RetryAfter: r.RetryAfter}
		}
		delay = max(delay, r.RetryAfter)
	}
	r.Next = now.Add(delay)
	if r.Next.After(deadline) {
		r.Next, r.AtDeadline = deadline, true
	}
	return r
}
