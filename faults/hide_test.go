package faults

import (
	"testing"

	"github.com/hookline/hookline/events"
)

// TestHideCountsRecordsOnce: hide=TYPE:N counts distinct records, and the
// one hidden stays hidden when a restarted lane is handed it again, until a
// batch without it was applied (a rebuild then heals). Before, every record
// handed counted and the hide was spent at once: a lane whose batch was
// not applied, then restarted, applied the record hidden from it
// (TestReconcileCommand then found another delivery diverged, or none).
func TestHideCountsRecordsOnce(t *testing.T) {
	s := &Set{HideType: "AttemptSucceeded", HideNth: 2}
	p := func(n uint64) events.Position { return events.Position{Commit: n, Prepare: n} }
	for i, c := range []struct {
		pos     events.Position
		want    bool
		applied bool // the batch it was hidden from was applied
	}{
		{pos: p(10)}, {pos: p(10)}, // read twice: counts once
		{pos: p(20), want: true},                // the second record: hidden, its batch not applied (a stale lane)
		{pos: p(20), want: true, applied: true}, // handed again to the lane's successor: hidden again
		{pos: p(30)},
		{pos: p(20)}, // a rebuild after the hide took: applied, the projections heal
	} {
		got := s.hides(c.pos)
		if got != c.want {
			t.Errorf("step %d: hides(%v) = %v, want %v", i, c.pos, got, c.want)
		}
		if got {
			s.hideTook(c.applied)
		}
	}
}
