package events

import (
	"fmt"
	"math"
)

// Revision is the 0-based index of an event within its stream.
type Revision uint64

// End stands for "the last event of the stream" when reading backwards.
const End Revision = math.MaxUint64

// Direction is the order of a stream read.
type Direction int

const (
	// Forwards reads from older to newer events.
	Forwards Direction = iota
	// Backwards reads from newer to older events.
	Backwards
)

// ExpectedRevision is what an append expects of its stream. It is a closed
// set: [Any], [NoStream], [StreamExists] and [Exact].
type ExpectedRevision interface {
	fmt.Stringer
	expectedRevision()
}

// Any appends whatever the stream's state.
type Any struct{}

// NoStream appends only if the stream does not exist yet.
type NoStream struct{}

// StreamExists appends only if the stream has at least one event.
type StreamExists struct{}

// Exact appends only if the stream's last event has this revision.
type Exact Revision

func (Any) expectedRevision()          {}
func (NoStream) expectedRevision()     {}
func (StreamExists) expectedRevision() {}
func (Exact) expectedRevision()        {}

func (Any) String() string          { return "any" }
func (NoStream) String() string     { return "no stream" }
func (StreamExists) String() string { return "stream exists" }
func (e Exact) String() string      { return fmt.Sprintf("revision %d", uint64(e)) }

// ExpectAfter returns the expectation of a writer that has seen the stream up
// to last (exists=false: it saw no event): [NoStream] or [Exact].
func ExpectAfter(last Revision, exists bool) ExpectedRevision {
	if !exists {
		return NoStream{}
	}
	return Exact(last)
}
