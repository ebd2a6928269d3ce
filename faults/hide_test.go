package faults

import (
	"testing"

	"github.com/hookline/hookline/events"
)

// TestHideCountsRecordsOnce: hide=TYPE:N counts distinct records, and the
// one hidden stays hidden when a restarted lane is handed it again. Before,
// every record handed counted, so a lane that restarted and read the first
// record again hid it the second time round and applied it the first
// (TestReconcileCommand then found another delivery diverged, or none).
func TestHideCountsRecordsOnce(t *testing.T) {
	s := &Set{HideType: "AttemptSucceeded", HideNth: 2}
	p := func(n uint64) events.Position { return events.Position{Commit: n, Prepare: n} }
	for i, c := range []struct {
		pos  events.Position
		want bool
	}{
		{p(10), false}, {p(10), false}, // read twice: counts once
		{p(20), true}, {p(20), true}, // the second record, hidden whenever handed
		{p(30), false}, {p(10), false},
	} {
		if got := s.hides(c.pos); got != c.want {
			t.Errorf("step %d: hides(%v) = %v, want %v", i, c.pos, got, c.want)
		}
	}
}
