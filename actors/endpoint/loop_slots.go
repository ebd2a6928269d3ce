package endpoint

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/dispatch"
	"github.com/hookline/hookline/projections/due"
)

// slots are the node's attempt slots as the endpoint asks for them: the
// dispatcher grants them one at a time, as messages to the grain, and the
// loop gives each to its first ready flight that may start (onSlot). With
// no dispatcher every ask is granted at once. Owned by the actor, like the
// loop.
type slots struct {
	d     Dispatcher // nil: no node-wide limit
	state *State     // the endpoint's, for its tenant
	id    string
	// asks are the slots asked for and not granted yet; probeAsked is set
	// while one of them is the breaker's half-open probe.
	asks       int
	probeAsked bool
}

// ask asks the dispatcher for a slot of class c, for the breaker's
// half-open probe if probe; the grant comes back as a message.
func (s *slots) ask(ctx actor.Context, c due.Class, probe bool) {
	s.asks++
	s.probeAsked = s.probeAsked || probe
	if s.d == nil {
		ctx.Send(ctx.Self(), &slotGranted{})
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	s.d.Acquire(s.state.TenantID, s.id, c, func() { root.Send(self, &slotGranted{}) })
}

// granted notes that a slot asked for was granted, and reports whether
// the breaker's probe was asked for among the asks (once: the probe goes
// with this slot, or not at all).
func (s *slots) granted() (probe bool) {
	s.asks = max(s.asks-1, 0)
	probe, s.probeAsked = s.probeAsked, false
	return probe
}

// release gives back a slot that served no attempt.
func (s *slots) release() { s.releaseAfter(dispatch.Unused) }

// releaseAfter gives a slot back to the dispatcher, saying what became of
// its attempt.
func (s *slots) releaseAfter(o dispatch.Outcome) {
	if s.d != nil {
		s.d.Release(s.state.TenantID, s.id, o)
	}
}

// promote turns the grain's slot requests for retries into requests for
// new work when new deliveries are ready: the dispatcher serves new work
// first, and holds retries back while new work anywhere on the node is
// late, so a retry's request must not stand in for a new delivery's.
func (s *slots) promote(ready []*flight) {
	if s.d == nil || s.asks == 0 {
		return
	}
	news := 0
	for _, f := range ready[:min(s.asks, len(ready))] {
		if f.class() == due.ClassNew {
			news++
		}
	}
	if news > 0 {
		s.d.Promote(s.state.TenantID, s.id, news)
	}
}

// leave drops the endpoint's asks and gives back every slot it holds: the
// grain stops.
func (s *slots) leave() {
	if s.d != nil {
		s.d.Leave(s.state.TenantID, s.id)
	}
}
