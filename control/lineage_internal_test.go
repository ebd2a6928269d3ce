package control

import (
	"testing"
	"time"

	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestAttemptsViewLegacy: attempts recorded before the lineage existed get
// what their events still tell (the trigger from their manual mark and
// their place among the automatic attempts, the next attempt a failure
// scheduled); attempts with a lineage are shown as recorded, unchanged.
func TestAttemptsViewLegacy(t *testing.T) {
	next := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	by := &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_API_KEY, Id: "key_1"}
	recorded := &hooklinev1.Attempt{Number: 4, Trigger: &hooklinev1.AttemptTrigger{Kind: hooklinev1.AttemptTrigger_KIND_RETRY, Retry: 2}}
	in := []history.Attempt{
		{Attempt: &hooklinev1.Attempt{Number: 1}, Retryable: true, NextAttemptAt: next},
		{Attempt: &hooklinev1.Attempt{Number: 2, Manual: true, IssuedBy: by}},
		{Attempt: &hooklinev1.Attempt{Number: 3}, Retryable: true, NextAttemptAt: next.Add(time.Minute)},
		{Attempt: recorded, Succeeded: true},
	}
	out := attemptsView(in)
	want := []struct {
		kind  hooklinev1.AttemptTrigger_Kind
		retry int32
		next  time.Time
	}{
		{kind: hooklinev1.AttemptTrigger_KIND_SCHEDULED, next: next},
		{kind: hooklinev1.AttemptTrigger_KIND_REPLAY},
		{kind: hooklinev1.AttemptTrigger_KIND_RETRY, retry: 1, next: next.Add(time.Minute)},
		{kind: hooklinev1.AttemptTrigger_KIND_RETRY, retry: 2},
	}
	for i, w := range want {
		a := out[i]
		if a.GetTrigger().GetKind() != w.kind || a.GetTrigger().GetRetry() != w.retry {
			t.Errorf("attempt %d trigger %v; want %v %d", i+1, a.GetTrigger(), w.kind, w.retry)
		}
		if got := a.GetRetry().GetNextAttemptAt(); (got == nil) != w.next.IsZero() || (got != nil && !got.AsTime().Equal(w.next)) {
			t.Errorf("attempt %d retry %v; want next at %v", i+1, a.GetRetry(), w.next)
		}
	}
	if out[1].GetTrigger().GetRequestedBy().GetId() != "key_1" {
		t.Errorf("the manual attempt's trigger %v; want requested by key_1", out[1].GetTrigger())
	}
	if out[3] != recorded {
		t.Error("an attempt with its lineage was copied; want it as recorded")
	}
	if in[0].Attempt.GetTrigger() != nil {
		t.Error("the history's attempt was changed in place")
	}
}
