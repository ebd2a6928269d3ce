package attempt

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Schedule defaults (DESIGN.md, section 4).
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
	s = s.withDefaults()
	if attempt >= s.MaxAttempts {
		return time.Time{}, false
	}
	deadline := plannedAt.Add(s.Deadline)
	if !now.Before(deadline) {
		return time.Time{}, false
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
	delay := time.Duration(rnd() * float64(window))
	if retryAfter > 0 {
		retryAfter = min(max(retryAfter, MinRetryAfter), MaxRetryAfter)
		if now.Add(retryAfter).After(deadline) {
			return time.Time{}, false
		}
		delay = max(delay, retryAfter)
	}
	next := now.Add(delay)
	if next.After(deadline) {
		next = deadline
	}
	return next, true
}
