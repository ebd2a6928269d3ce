package endpoint

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

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
