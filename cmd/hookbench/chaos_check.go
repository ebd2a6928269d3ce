package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// The chaos run's checks: one per promise of docs/semantics.md, each a
// function of what the run saw (chaosFacts), never of what the node says
// of itself. docs/semantics.md lists them beside their promises.

// chaosCheck is one named check and the promise it proves.
type chaosCheck struct {
	name, promise string
	run           func(f *chaosFacts) []chaosViolation
}

// chaosChecks are every check, in the order the report prints them.
var chaosChecks = []chaosCheck{
	{"nothing_lost", "every delivery of an acknowledged event that was not erased reaches its endpoint with a 2xx (or ends failed on a permanent answer)", checkLost},
	{"every_delivery_ends", "every delivery ends: none is pending once nothing holds it (no pause, no outage) and its retries had time", checkEnds},
	{"plan_once", "the plan is decided once: each event plans exactly the endpoints subscribed to its type, and publishing it again answers a duplicate with the same deliveries", checkPlan},
	{"same_id_same_bytes", "every message of a delivery, duplicates and replays included, carries its webhook-id, its event and the bytes published, to its own endpoint", checkSameBytes},
	{"signed", "every message is signed with a secret the endpoint was given (rotations included)", checkSigned},
	{"answer_ends", "a 2xx (or a permanent 4xx) ends a delivery: it comes again only across a replay, a recovery or a process change", checkAnswerEnds},
	{"sequence_numbering", "per endpoint and key, each new delivery carries one more webhook-sequence than the last the key was sent with, whatever retention, rebuilds and moves did, and a repeat or a replay the one it was first sent with (counted once per key: its first message off)", checkSequence},
	{"key_order", "per endpoint and key, a delivery goes only once the key's earlier ones have ended", checkKeyOrder},
	{"one_member_at_a_time", "no delivery is sent (or leased) again while a message of it is in flight, unless the member sending it died (or, the only one, stopped)", checkOneMember},
	{"key_one_in_flight", "per endpoint and key, never two requests in flight at once", checkOneInFlight},
	{"secret_header_hosts", "a secret header value goes only to a host it was given for", checkSecretHosts},
	{"erased_not_sent", "no erased payload is pushed or pulled after the erasure was answered, but a request that had left before", checkErasedNotSent},
	{"erased_not_readable", "no erased value is readable through the API after the erasure (events, audit, deliveries' responses, a publish again)", checkErasedNotReadable},
	{"erased_not_in_files", "no erased value is left in the nodes' or the database's files", checkErasedFiles},
	{"reconcile_clean", "reconcile finds the log and every projection in agreement at the end, but for what the run caused (a publish racing a change of its endpoint; a plan retention dropped before its delivery)", checkReconcile},
}

// chaosViolation is one broken promise: its check, what it is about, and
// when.
type chaosViolation struct {
	check                                  string
	tenant, endpoint, key, delivery, event string
	at                                     time.Time
	detail                                 string
}

func checkLost(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	f.each(func(e *chaosEvent, endpoint, id string) {
		ss := f.seenBy[id]
		if delivered(e, endpoint, ss) || f.erasable(e) || slices.ContainsFunc(ss, chaosSeen.permanent) || f.retained(e, id) {
			return
		}
		out = append(out, e.violation("nothing_lost", id, e.ack, "published at %s, %d messages %s, none answered 2xx with its bytes",
			f.rel(e.ack), len(ss), statuses(ss)))
	})
	return out
}

func checkEnds(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	for _, id := range f.end.pending {
		if e := f.byDelivery[id]; e != nil {
			out = append(out, e.violation("every_delivery_ends", id, e.ack, "published at %s, still pending %v after the schedule (%d messages %s)",
				f.rel(e.ack), f.end.drained.Round(time.Second), len(f.seenBy[id]), statuses(f.seenBy[id])))
			continue
		}
		out = append(out, chaosViolation{check: "every_delivery_ends", delivery: id, detail: "still pending, of no event the run published"})
	}
	return out
}

func checkPlan(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	for _, e := range f.events {
		for i, id := range e.ids {
			if id == "" {
				out = append(out, chaosViolation{check: "plan_once", tenant: e.tenant, endpoint: e.endpoints[i], key: e.key, event: e.id, at: e.ack,
					detail: fmt.Sprintf("the publish's answer planned no delivery to %s, subscribed to the event's type", e.endpoints[i])})
			}
		}
		if len(e.extra) > 0 {
			out = append(out, chaosViolation{check: "plan_once", tenant: e.tenant, event: e.id, key: e.key, at: e.ack,
				detail: fmt.Sprintf("the publish's answer planned deliveries %v besides the subscribed endpoints'", e.extra)})
		}
	}
	for _, r := range f.republishes {
		if r.why != "" {
			out = append(out, chaosViolation{check: "plan_once", tenant: r.tenant, event: r.event, at: r.at, detail: "published again: " + r.why})
		}
	}
	return out
}

func checkSameBytes(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	done := map[string]bool{}
	for _, s := range f.seen {
		if done[s.Delivery] || !s.verified() {
			continue
		}
		e := f.byDelivery[s.Delivery]
		why := ""
		switch {
		case e == nil:
			why = fmt.Sprintf("webhook-id %q was never planned", s.Delivery)
		case e.endpointOf(s.Delivery) != "" && e.endpointOf(s.Delivery) != s.Endpoint:
			why = fmt.Sprintf("sent to %s, planned for %s", s.Endpoint, e.endpointOf(s.Delivery))
		case s.Event != e.id:
			why = fmt.Sprintf("carried webhook-event-id %q", s.Event)
		case s.Body != e.body:
			why = "carried other bytes than the event's"
		default:
			continue
		}
		done[s.Delivery] = true
		out = append(out, f.seenViolation("same_id_same_bytes", s, why+" at "+f.rel(s.Arrived)))
	}
	return out
}

// seenViolation is a violation of check by a message.
func (f *chaosFacts) seenViolation(check string, s chaosSeen, detail string) chaosViolation {
	v := chaosViolation{check: check, endpoint: s.Endpoint, delivery: s.Delivery, event: s.Event, at: s.Arrived, detail: detail}
	if e := f.byDelivery[s.Delivery]; e != nil {
		v.tenant, v.key = e.tenant, e.key
	}
	return v
}

func checkSigned(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	done := map[string]bool{}
	for _, s := range f.seen {
		if s.verified() || done[s.Delivery] {
			continue
		}
		done[s.Delivery] = true
		out = append(out, f.seenViolation("signed", s, fmt.Sprintf("a message at %s (host %s) verified with none of the endpoint's secrets", f.rel(s.Arrived), s.Host)))
	}
	return out
}

func checkAnswerEnds(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	f.each(func(e *chaosEvent, _, id string) {
		ss := f.seenBy[id]
		end := slices.IndexFunc(ss, func(s chaosSeen) bool { return s.verified() && s.ends() })
		if end < 0 {
			return
		}
		for _, s := range ss[end+1:] {
			if !f.resent(e, id, s.Arrived) && !f.explains(ss[end].Arrived, s.Arrived) {
				out = append(out, e.violation("answer_ends", id, s.Arrived, "answered %d at %s, sent again at %s with no replay, recovery or process change between",
					ss[end].Status, f.rel(ss[end].Arrived), f.rel(s.Arrived)))
				return
			}
		}
	})
	return out
}

// keyed is one key's deliveries to one endpoint ordered by key, in the
// order their events were published.
type keyed struct {
	tenant, endpoint, key string
	events                []*chaosEvent
	ids                   []string
}

// eachKeyed calls fn with every key's deliveries to every endpoint that
// orders by key.
func (f *chaosFacts) eachKeyed(fn func(k keyed)) {
	refs := slices.SortedFunc(func(yield func(keyRef) bool) {
		for r := range f.keys {
			if !yield(r) {
				return
			}
		}
	}, func(a, b keyRef) int { return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.key, b.key)) })
	for _, r := range refs {
		byEP := map[string]*keyed{}
		var eps []string
		for _, id := range f.keys[r] {
			e := f.byEvent[eventKey{r.tenant, id}]
			if e == nil {
				continue
			}
			for i, ep := range e.endpoints {
				if !f.ordered[ep] || e.ids[i] == "" {
					continue
				}
				if byEP[ep] == nil {
					byEP[ep] = &keyed{tenant: r.tenant, endpoint: ep, key: r.key}
					eps = append(eps, ep)
				}
				byEP[ep].events, byEP[ep].ids = append(byEP[ep].events, e), append(byEP[ep].ids, e.ids[i])
			}
		}
		for _, ep := range eps {
			fn(*byEP[ep])
		}
	}
}

func checkSequence(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	// The first message of each key whose sequence is off: those after it
	// are most often off by as much.
	f.eachKeyed(func(k keyed) {
		var msgs []chaosSeen
		for _, id := range k.ids {
			msgs = append(msgs, f.seenBy[id]...)
		}
		slices.SortStableFunc(msgs, func(a, b chaosSeen) int { return a.Arrived.Compare(b.Arrived) })
		first := map[string]int64{} // by delivery: the sequence of its first message
		var last int64              // the highest sequence of the key's deliveries so far
		var lastAt time.Time
		for _, m := range msgs {
			if !m.verified() {
				continue
			}
			e := f.byDelivery[m.Delivery]
			if seq, seen := first[m.Delivery]; seen {
				if m.Seq != seq {
					out = append(out, e.violation("sequence_numbering", m.Delivery, m.Arrived, "sent again at %s with webhook-sequence %d; it was first sent with %d (key %s to %s)",
						f.rel(m.Arrived), m.Seq, seq, k.key, k.endpoint))
					return
				}
				continue
			}
			jumped := f.erasedBetween(e.tenant, lastAt, m.Arrived) || f.explains(lastAt, m.Arrived)
			if m.Seq != last+1 && !(jumped && m.Seq > last) {
				out = append(out, e.violation("sequence_numbering", m.Delivery, m.Arrived, "a new delivery of key %s to %s carried webhook-sequence %d at %s; the key's last was %d",
					k.key, k.endpoint, m.Seq, f.rel(m.Arrived), last))
				return
			}
			first[m.Delivery], last, lastAt = m.Seq, max(last, m.Seq), m.Arrived
		}
	})
	return out
}

// erasedBetween reports whether the tenant was erased between two times
// (a key's sequence then jumps, once, above its endpoint's highest).
func (f *chaosFacts) erasedBetween(tenant string, from, to time.Time) bool {
	return slices.ContainsFunc(f.erasures, func(x chaosErasure) bool {
		return x.done && x.tenant == tenant && !x.answered.Before(from) && !x.began.After(to)
	})
}

// automatic returns the messages of a key's deliveries the node sent of
// its own accord (not a replay's or a recovery's), in the order they came.
func (f *chaosFacts) automatic(k keyed) []chaosSeen {
	var out []chaosSeen
	for i, id := range k.ids {
		for _, s := range f.seenBy[id] {
			if s.verified() && !f.resent(k.events[i], id, s.Arrived) {
				out = append(out, s)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b chaosSeen) int { return a.Arrived.Compare(b.Arrived) })
	return out
}

func checkKeyOrder(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	f.eachKeyed(func(k keyed) {
		ended := map[string]time.Time{} // by delivery: its first automatic 2xx or permanent answer
		for _, s := range f.automatic(k) {
			if _, ok := ended[s.Delivery]; !ok && s.ends() {
				ended[s.Delivery] = s.Arrived
			}
		}
		// Walking the key's deliveries in publish order, the latest end so
		// far must come before each message of the next ones.
		var last time.Time
		lastID := ""
		for i, id := range k.ids {
			for _, s := range f.automatic(keyed{events: k.events[i : i+1], ids: k.ids[i : i+1]}) {
				if last.After(s.Arrived) {
					out = append(out, k.events[i].violation("key_order", id, s.Arrived, "arrived at %s, before the key's earlier delivery %s ended (at %s)",
						f.rel(s.Arrived), lastID, f.rel(last)))
					break
				}
			}
			if t, ok := ended[id]; ok && t.After(last) {
				last, lastID = t, id
			}
		}
	})
	return out
}

func checkOneInFlight(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	f.eachKeyed(func(k keyed) {
		var open chaosSeen // the message in flight answered last
		for _, s := range f.automatic(k) {
			if !open.Answered.IsZero() && s.Arrived.Before(open.Answered) && (s.Delivery != open.Delivery || !f.explains(open.Arrived, s.Arrived)) {
				e := f.byDelivery[s.Delivery]
				out = append(out, e.violation("key_one_in_flight", s.Delivery, s.Arrived, "arrived at %s while %s (at %s) was in flight until %s",
					f.rel(s.Arrived), open.Delivery, f.rel(open.Arrived), f.rel(open.Answered)))
			}
			if s.Answered.After(open.Answered) {
				open = s
			}
		}
	})
	return out
}

// leaseTime is the pull consumers' lease: a message not acknowledged is
// leased this long.
const leaseTime = 30 * time.Second

// until is when a message stopped being in flight: its answer, or for a
// pulled message never acknowledged the end of its lease, which a switch
// of its endpoint to push ends at once.
func (f *chaosFacts) until(s chaosSeen) time.Time {
	if s.Host != pullHost || !s.Answered.IsZero() {
		return s.Answered
	}
	end := s.Arrived.Add(leaseTime)
	ti, ei := f.indexOf(f.tenantOf(s), s.Endpoint)
	for _, st := range f.steps {
		if a := st.Action; a.Kind == actPush && a.Tenant == ti && a.Endpoint == ei && st.Began.After(s.Arrived) && st.Began.Before(end) {
			end = st.Began
		}
	}
	return end
}

// tenantOf is the tenant of a message's delivery ("" unknown).
func (f *chaosFacts) tenantOf(s chaosSeen) string {
	if e := f.byDelivery[s.Delivery]; e != nil {
		return e.tenant
	}
	return ""
}

func checkOneMember(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	f.each(func(e *chaosEvent, _, id string) {
		ss := f.seenBy[id]
		for i := 1; i < len(ss); i++ {
			prev := slices.MaxFunc(ss[:i], func(a, b chaosSeen) int { return f.until(a).Compare(f.until(b)) })
			if ss[i].Arrived.Before(f.until(prev)) && !f.killed(prev.Arrived, ss[i].Arrived) {
				out = append(out, e.violation("one_member_at_a_time", id, ss[i].Arrived, "sent again at %s (host %s) while the message of %s was in flight until %s, and no member died between",
					f.rel(ss[i].Arrived), ss[i].Host, f.rel(prev.Arrived), f.rel(f.until(prev))))
				return
			}
		}
	})
	return out
}

// killed reports whether a member died between two times: was killed
// (kill -9), or, when it is the only one, stopped at all (its grains'
// attempts and leases end with it: there is no member to pass them to).
func (f *chaosFacts) killed(prev, next time.Time) bool {
	return slices.ContainsFunc(f.windows, func(w window) bool {
		return (w.why == string(actKill) || f.single) && !w.from.After(next) && !w.to.Before(prev)
	})
}

func checkSecretHosts(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	done := map[string]bool{}
	for _, s := range f.seen {
		if s.Secret == "" || done[s.Endpoint+" "+s.Secret+" "+s.Host] {
			continue
		}
		var given []string
		ok := slices.ContainsFunc(f.grants[s.Endpoint], func(g headerGrant) bool {
			if g.value == s.Secret {
				given = append(given, g.host)
			}
			return g.value == s.Secret && g.host == s.Host && !g.at.After(s.Arrived)
		})
		if ok {
			continue
		}
		done[s.Endpoint+" "+s.Secret+" "+s.Host] = true
		out = append(out, f.seenViolation("secret_header_hosts", s,
			fmt.Sprintf("%s value %q went to host %s at %s; it was given for %v", chaosSecretHeader, s.Secret, s.Host, f.rel(s.Arrived), given)))
	}
	return out
}

func checkErasedNotSent(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	done := map[string]bool{}
	for _, s := range f.seen {
		e := f.byDelivery[s.Delivery]
		if e == nil || done[s.Delivery] {
			continue
		}
		if x := f.erasedBefore(e); x != nil && s.Arrived.After(x.answered) && !straggler(s, x) {
			done[s.Delivery] = true
			how := "pushed to " + s.Host
			if s.Host == pullHost {
				how = "pulled"
			}
			out = append(out, e.violation("erased_not_sent", s.Delivery, s.Arrived, "%s at %s; its tenant's erasure was answered at %s",
				how, f.rel(s.Arrived), f.rel(x.answered)))
		}
	}
	return out
}

// maxAttempt is the longest an attempt may take (attempt.MaxAttemptTimeout).
const maxAttempt = 30 * time.Second

// straggler reports whether a request arriving after an erasure was
// answered had left before: signed before the erasure returned (to the
// second), and arriving within an attempt's time of it. A pulled message
// is no straggler: a pull after the erasure hands out nothing.
func straggler(s chaosSeen, x *chaosErasure) bool {
	return s.Host != pullHost && s.Signed.Unix() <= x.answered.Unix() && s.Arrived.Before(x.answered.Add(maxAttempt))
}

func checkErasedNotReadable(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	for _, p := range f.probes {
		if p.control || !p.found {
			continue
		}
		out = append(out, chaosViolation{check: "erased_not_readable", tenant: p.tenant, event: p.event, at: p.at,
			detail: fmt.Sprintf("%s at %s answered with the erased payload's marker", p.what, f.rel(p.at))})
	}
	return out
}

func checkErasedFiles(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	for _, h := range f.end.files {
		v := chaosViolation{check: "erased_not_in_files", event: h.event, detail: fmt.Sprintf("the marker of erased event %s is in %s", h.event, h.file)}
		if e := f.eventByID(h.event); e != nil {
			v.tenant, v.key = e.tenant, e.key
		}
		out = append(out, v)
	}
	return out
}

func checkReconcile(f *chaosFacts) []chaosViolation {
	var out []chaosViolation
	for _, d := range f.end.reconcile {
		v := chaosViolation{check: "reconcile_clean", tenant: d.tenant, event: d.event, detail: d.kind + ": " + d.detail}
		e := f.byEvent[eventKey{d.tenant, d.event}]
		for _, id := range d.deliveries {
			if x := f.byDelivery[id]; x != nil {
				e, v.delivery = x, id
			}
		}
		if e != nil {
			v.tenant, v.event, v.key, v.endpoint, v.at = e.tenant, e.id, e.key, e.endpointOf(v.delivery), e.ack
		}
		if e != nil && f.reconcileExcused(d.kind, e, v.endpoint) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// reconcileExcused reports whether the run caused what reconcile found:
// a publish that raced a change of the endpoint it planned for (the
// publishing member may not have applied the change yet: reconcile
// reports its plan as of the log's order), or, on one node with a short
// retention, a plan that retention dropped before its delivery's stream
// (it was last written later).
func (f *chaosFacts) reconcileExcused(kind string, e *chaosEvent, endpoint string) bool {
	switch kind {
	case "plan_config_version", "plan_unsubscribed", "plan_short":
		ti, ei := f.indexOf(e.tenant, endpoint)
		return slices.ContainsFunc(f.steps, func(st chaosStep) bool {
			return st.Action.Lane == laneConfig && st.Action.Tenant == ti && (endpoint == "" || st.Action.Endpoint == ei) &&
				!st.Began.After(e.ack) && !st.Ended.Before(e.sent)
		})
	case "outcome_without_plan":
		return f.retention > 0 && slices.ContainsFunc(f.restarts, func(t time.Time) bool { return t.Add(-f.retention).After(e.ack) })
	}
	return false
}
