package control

import (
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// attemptsView is a delivery's attempts as the API shows them, oldest
// first, each with its lineage as its outcome event recorded it (see
// actors/endpoint/loop_lineage.go). An attempt recorded before the lineage
// existed gets what its event can still tell: its trigger from its manual
// mark, its issuer and its place among the automatic attempts, and the
// next attempt its failure scheduled.
func attemptsView(attempts []history.Attempt) []*hooklinev1.Attempt {
	out := make([]*hooklinev1.Attempt, 0, len(attempts))
	var autos int32
	for _, h := range attempts {
		a := h.Attempt
		manual := a.GetManual()
		if a.GetTrigger() == nil || (a.GetRetry() == nil && !h.Succeeded && !h.NextAttemptAt.IsZero()) {
			a = proto.CloneOf(a)
			if a.Trigger == nil {
				a.Trigger = legacyTrigger(a, autos)
			}
			if a.Retry == nil && !h.Succeeded && !h.NextAttemptAt.IsZero() {
				a.Retry = &hooklinev1.RetryDecision{Outcome: hooklinev1.RetryDecision_OUTCOME_SCHEDULED, NextAttemptAt: ts(h.NextAttemptAt)}
			}
		}
		if !manual {
			autos++
		}
		out = append(out, a)
	}
	return out
}

// legacyTrigger is the trigger of an attempt recorded without one, after
// autos automatic attempts.
func legacyTrigger(a *hooklinev1.Attempt, autos int32) *hooklinev1.AttemptTrigger {
	switch {
	case a.GetManual():
		return &hooklinev1.AttemptTrigger{Kind: hooklinev1.AttemptTrigger_KIND_REPLAY, RequestedBy: a.GetIssuedBy()}
	case autos == 0:
		return &hooklinev1.AttemptTrigger{Kind: hooklinev1.AttemptTrigger_KIND_SCHEDULED}
	}
	return &hooklinev1.AttemptTrigger{Kind: hooklinev1.AttemptTrigger_KIND_RETRY, Retry: autos}
}
