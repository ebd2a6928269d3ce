package events

import "fmt"

// Position is the place of an event in the whole log. Positions grow with
// commit order: an event committed later has a greater position. The zero
// Position, [Start], comes before every event. Backends fill both fields;
// those with a single sequence set Commit and Prepare to the same value.
type Position struct {
	Commit  uint64
	Prepare uint64
}

// Start is the position before the first event of the log.
var Start = Position{}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	if p.Commit != q.Commit {
		return p.Commit < q.Commit
	}
	return p.Prepare < q.Prepare
}

// IsStart reports whether p is [Start].
func (p Position) IsStart() bool { return p == Start }

func (p Position) String() string {
	if p.Commit == p.Prepare {
		return fmt.Sprintf("%d", p.Commit)
	}
	return fmt.Sprintf("%d/%d", p.Commit, p.Prepare)
}
