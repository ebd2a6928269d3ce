package command

import (
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
)

// MaxDone is how many of its most recent requests a grain remembers. A
// retry comes within seconds of the request it repeats (the cluster's
// request timeout, three attempts), so a short memory is enough.
const MaxDone = 64

// Done remembers the request ids of the commands a grain carried out most
// recently, with the revision of the first event each one wrote: a retried
// command (same request id) is answered from what the first one wrote,
// instead of running twice. It is rebuilt with the stream, from the
// request_id of the events: a retry that reaches a new activation (the
// first one's node died after the append) is recognised too. The zero
// value is empty and ready; it is owned by the grain's actor.
type Done struct {
	revs  map[string]events.Revision
	order []string // oldest first, at most MaxDone
}

// requestIDer is an event that carries the request id of its command.
type requestIDer interface{ GetRequestId() string }

// Observe records that the event msg, at revision rev of the stream, was
// written for its request id (if it carries one). The first event of a
// request is the one remembered.
func (d *Done) Observe(msg proto.Message, rev events.Revision) {
	r, ok := msg.(requestIDer)
	if !ok || r.GetRequestId() == "" {
		return
	}
	id := r.GetRequestId()
	if d.revs == nil {
		d.revs = make(map[string]events.Revision, 4)
	}
	if _, seen := d.revs[id]; seen {
		return
	}
	if len(d.order) == MaxDone {
		delete(d.revs, d.order[0])
		d.order = append(d.order[:0], d.order[1:]...)
	}
	d.revs[id] = rev
	d.order = append(d.order, id)
}

// Find returns the revision of the first event written for requestID, if
// the request is remembered.
func (d *Done) Find(requestID string) (events.Revision, bool) {
	if requestID == "" {
		return 0, false
	}
	rev, ok := d.revs[requestID]
	return rev, ok
}
