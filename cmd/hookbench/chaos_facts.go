package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// What the chaos run's checks judge (chaosFacts): the ledger's events,
// what the run saw and did, and what it found at the end, with the
// lookups and the excuses the checks share.

// chaosEvent is one event of the ledger as the checks read it.
type chaosEvent struct {
	id, tenant, key, marker string
	body                    uint64
	// sent is when its first publish call began, ack when one was
	// answered.
	sent, ack time.Time
	// endpoints must receive it; ids are the deliveries the node planned
	// for them ("" none), extra those it planned besides.
	endpoints, ids, extra []string
}

// chaosEnd is what the run found once the work had drained.
type chaosEnd struct {
	drained   time.Duration
	pending   []string // the deliveries the node still had pending
	reconcile []discrepancy
	files     []fileHit
	notes     []string
}

// discrepancy is one discrepancy reconcile found.
type discrepancy struct {
	kind, tenant, event, detail string
	deliveries                  []string
}

// chaosFacts is everything the checks judge.
type chaosFacts struct {
	seed        int64
	start       time.Time
	events      []*chaosEvent
	keys        map[keyRef][]string // each key's events, in publish order
	ordered     map[string]bool     // the endpoints ordered by key
	seen        []chaosSeen         // in the order they came
	steps       []chaosStep
	grants      map[string][]headerGrant
	erasures    []chaosErasure
	resends     []resend
	probes      []chaosProbe
	republishes []republish
	windows     []window
	// restarts are the nodes' starts after the first; with retention set
	// (one node on the embedded log) each drops the streams last written
	// retention before it.
	restarts  []time.Time
	retention time.Duration
	single    bool // one node: no member to pass a move on to
	end       chaosEnd

	byDelivery map[string]*chaosEvent
	byEvent    map[eventKey]*chaosEvent
	seenBy     map[string][]chaosSeen // by delivery, in the order they came
}

// index builds the facts' lookups.
func (f *chaosFacts) index() {
	f.byDelivery, f.byEvent, f.seenBy = map[string]*chaosEvent{}, map[eventKey]*chaosEvent{}, map[string][]chaosSeen{}
	for _, e := range f.events {
		f.byEvent[eventKey{e.tenant, e.id}] = e
		for _, id := range append(slices.Clone(e.ids), e.extra...) {
			if id != "" {
				f.byDelivery[id] = e
			}
		}
	}
	slices.SortStableFunc(f.seen, func(a, b chaosSeen) int { return a.Arrived.Compare(b.Arrived) })
	for _, s := range f.seen {
		f.seenBy[s.Delivery] = append(f.seenBy[s.Delivery], s)
	}
}

// rel is t as seconds since the start of the run.
func (f *chaosFacts) rel(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("+%.3fs", t.Sub(f.start).Seconds())
}

// endpointOf is the endpoint an event's delivery is planned for.
func (e *chaosEvent) endpointOf(delivery string) string {
	if i := slices.Index(e.ids, delivery); i >= 0 {
		return e.endpoints[i]
	}
	return ""
}

// erasedBefore returns the erasure that erased e's payload for sure (it
// was published before the erasure began), or nil.
func (f *chaosFacts) erasedBefore(e *chaosEvent) *chaosErasure {
	for i, x := range f.erasures {
		if x.done && x.tenant == e.tenant && e.ack.Before(x.began) {
			return &f.erasures[i]
		}
	}
	return nil
}

// erasable reports whether an erasure may have erased e's payload: it was
// published before the erasure was answered.
func (f *chaosFacts) erasable(e *chaosEvent) bool {
	return slices.ContainsFunc(f.erasures, func(x chaosErasure) bool {
		return x.done && x.tenant == e.tenant && e.sent.Before(x.answered)
	})
}

// retained reports whether retention may have dropped a delivery's
// streams: a node started more than the retention after the last the
// run saw of it (its publish, its last message).
func (f *chaosFacts) retained(e *chaosEvent, delivery string) bool {
	if f.retention == 0 {
		return false
	}
	last := e.ack
	for _, s := range f.seenBy[delivery] {
		last = later(last, s.Arrived)
	}
	return slices.ContainsFunc(f.restarts, func(t time.Time) bool { return t.Add(-f.retention).After(last) })
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// explains reports whether a window of the bench (a process change) lies
// between two times.
func (f *chaosFacts) explains(prev, next time.Time) bool {
	return slices.ContainsFunc(f.windows, func(w window) bool { return !w.from.After(next) && !w.to.Before(prev) })
}

// resent reports whether the delivery was sent again on purpose (a replay
// or a recovery) before at.
func (f *chaosFacts) resent(e *chaosEvent, delivery string, at time.Time) bool {
	return slices.ContainsFunc(f.resends, func(r resend) bool {
		return !r.at.After(at) && r.covers(e.endpointOf(delivery), delivery, e.ack)
	})
}

// violation is a violation of check about a delivery of e.
func (e *chaosEvent) violation(check, delivery string, at time.Time, format string, args ...any) chaosViolation {
	return chaosViolation{check: check, tenant: e.tenant, endpoint: e.endpointOf(delivery), key: e.key, delivery: delivery, event: e.id,
		at: at, detail: fmt.Sprintf(format, args...)}
}

// each calls f with every planned delivery of every event.
func (f *chaosFacts) each(fn func(e *chaosEvent, endpoint, delivery string)) {
	for _, e := range f.events {
		for i, id := range e.ids {
			if id != "" {
				fn(e, e.endpoints[i], id)
			}
		}
	}
}

// statuses is the answers a delivery's messages had, for a detail.
func statuses(ss []chaosSeen) string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprint(s.Status))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// delivered reports whether one of the delivery's messages reached its
// endpoint with the published bytes and was answered 2xx.
func delivered(e *chaosEvent, endpoint string, ss []chaosSeen) bool {
	return slices.ContainsFunc(ss, func(s chaosSeen) bool { return s.ok() && s.Body == e.body && s.Endpoint == endpoint })
}

// eventByID returns the event with the id (chaos event ids are unique
// across tenants).
func (f *chaosFacts) eventByID(id string) *chaosEvent {
	for _, e := range f.events {
		if e.id == id {
			return e
		}
	}
	return nil
}

// facts gathers what the checks judge: the ledger's events, what the run
// saw and did, and end.
func (c *chaosRun) facts(end chaosEnd) *chaosFacts {
	f := &chaosFacts{seed: c.sched.Seed, start: c.start, keys: map[keyRef][]string{}, ordered: map[string]bool{}, grants: map[string][]headerGrant{},
		retention: c.sys.retention, restarts: c.sys.restarts(), single: c.sys.cluster == nil, end: end}
	c.mu.Lock()
	for _, m := range c.eps {
		f.ordered[m.name] = m.role.ordered
	}
	c.mu.Unlock()
	l := c.b.ledger
	l.mu.Lock()
	for _, e := range l.events {
		f.events = append(f.events, &chaosEvent{id: e.id, tenant: e.tenant.ID, key: e.key, marker: chaosMarker(c.sched.Seed, e.id), body: e.body,
			sent: e.sent, ack: e.ack, endpoints: slices.Clone(e.endpoints), ids: slices.Clone(e.ids), extra: slices.Clone(e.extra)})
	}
	for k, v := range l.keys {
		f.keys[k] = slices.Clone(v)
	}
	f.windows = slices.Clone(l.windows)
	l.mu.Unlock()
	c.rec.note(func(r *chaosRecorder) {
		f.seen, f.steps, f.erasures = slices.Clone(r.seen), slices.Clone(r.steps), slices.Clone(r.erasures)
		f.resends, f.probes, f.republishes = slices.Clone(r.resends), slices.Clone(r.probes), slices.Clone(r.republishes)
		for ep, gs := range r.grants {
			f.grants[ep] = slices.Clone(gs)
		}
		for _, e := range f.events {
			if t, ok := r.firstSent[e.id]; ok && t.Before(e.sent) {
				e.sent = t
			}
		}
	})
	slices.SortFunc(f.events, func(a, b *chaosEvent) int { return strings.Compare(a.id, b.id) })
	f.index()
	return f
}
