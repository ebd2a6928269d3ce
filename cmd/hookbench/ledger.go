package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// ledger is hookbench's own account of a run: for every event published,
// the endpoints that must receive it, computed from the endpoints the bench
// created (their event types; the bench sets no filters), kept apart from
// what the node answered. Every figure of loss, duplicates and bytes is
// counted against it and the receiver's records (count), so that a node
// that plans too little, or sends other bytes, cannot grade its own work.
//
// Lock order: ledger.mu, then the receiver's.
type ledger struct {
	mu     sync.Mutex          // guards the fields below
	events map[eventKey]*entry // by tenant and event id (ids are per tenant)
	// tenants are the tenants of the endpoints the receiver serves, by
	// the endpoints' names.
	tenants map[string]string
	// announced are the webhook-ids the node's answers planned for the
	// expected deliveries of awaited tenants: what the run waits for.
	announced []string
	windows   []window
	// keys lists each ordering key's events in the order they were
	// published: a key is only ever published by one publisher, one batch
	// after another and at most once per batch (see Publish).
	keys map[keyRef][]string
}

// keyRef names a tenant's ordering key.
type keyRef struct{ tenant, key string }

// eventKey names an event: event ids are unique per tenant.
type eventKey struct{ tenant, event string }

// entry is one event in the ledger.
type entry struct {
	id        string
	tenant    *Tenant
	phase     int
	sent, ack time.Time // the publish call that was answered: started, answered
	via       string    // the address of the node that answered it
	body      uint64    // BodyHash of the payload published
	key       string    // the ordering key published with it
	// endpoints are the endpoints that must receive the event (the bench's
	// names, the receiver's paths), and ids the webhook-id the node
	// announced for each ("" none).
	endpoints []string
	ids       []string
	// extra are the deliveries the node announced that the bench did not
	// expect (another endpoint, or another id for an expected one).
	extra []string
}

// window is a disturbance the bench caused and timed: a kill, a restart,
// a fault. A duplicate whose two receipts straddle one is explained.
type window struct {
	from, to time.Time
	why      string
}

// windowSlack is how long after a kill that the bench did not follow by a
// restart its window lasts: the attempts in flight at the kill arrive by
// then.
const windowSlack = time.Second

func newLedger() *ledger {
	return &ledger{events: map[eventKey]*entry{}, tenants: map[string]string{}, keys: map[keyRef][]string{}}
}

// addTenant enters the tenant of t's endpoints: a receipt's endpoint says
// whose event it carries.
func (l *ledger) addTenant(t *Tenant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ep := range t.Endpoints {
		l.tenants[ep] = t.ID
	}
}

// of is the entry of the event a receipt at endpoint carries (nil none).
func (l *ledger) of(endpoint, eventID string) *entry {
	return l.events[eventKey{l.tenants[endpoint], eventID}]
}

// record enters a batch the node accepted: each event's expected
// deliveries from t's subscriptions, and what the node answered for it.
// An event answered again (a retried batch, a republish) keeps its first
// entry; a new announcement fills in or adds to it.
func (l *ledger) record(t *Tenant, evs []*controlv1.PublishRequest, resps []*controlv1.PublishResponse, sent, ack time.Time, phase int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ev := range evs {
		k := eventKey{t.ID, ev.GetEventId()}
		e := l.events[k]
		if e == nil {
			eps := t.subs[ev.GetType()]
			e = &entry{id: ev.GetEventId(), tenant: t, phase: phase, sent: sent, ack: ack, body: BodyHash(ev.GetPayload()),
				endpoints: eps, ids: make([]string, len(eps)), key: ev.GetOrderingKey()}
			l.events[k] = e
			if key := ev.GetOrderingKey(); key != "" {
				kr := keyRef{t.ID, key}
				l.keys[kr] = append(l.keys[kr], ev.GetEventId())
			}
		}
		for _, d := range resps[i].GetDeliveries() {
			id := d.GetDeliveryId()
			pos := slices.Index(e.endpoints, t.names[d.GetEndpointId()])
			switch {
			case pos >= 0 && e.ids[pos] == "":
				e.ids[pos] = id
				if t.Await {
					l.announced = append(l.announced, id)
				}
			case pos >= 0 && e.ids[pos] == id, slices.Contains(e.extra, id):
			default:
				e.extra = append(e.extra, id)
			}
		}
	}
}

// answeredBy notes the node that answered t's events evs, for the events
// that have no such note yet (a retried batch keeps its first answer's).
func (l *ledger) answeredBy(t *Tenant, evs []*controlv1.PublishRequest, via string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range evs {
		if e := l.events[eventKey{t.ID, ev.GetEventId()}]; e != nil && e.via == "" {
			e.via = via
		}
	}
}

// plannedIDs returns the deliveries the node's first answer planned for
// a tenant's event, sorted, and whether the ledger knows the event.
func (l *ledger) plannedIDs(tenant, event string) ([]string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events[eventKey{tenant, event}]
	if e == nil {
		return nil, false
	}
	var out []string
	for _, id := range append(slices.Clone(e.ids), e.extra...) {
		if id != "" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, true
}

// disturbed enters a window; a zero to means from + windowSlack.
func (l *ledger) disturbed(why string, from, to time.Time) {
	if to.IsZero() {
		to = from.Add(windowSlack)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.windows = append(l.windows, window{from: from, to: to, why: why})
}

// explains reports whether a window lies between two receipts.
func (l *ledger) explains(prev, next time.Time) bool {
	for _, w := range l.windows {
		if !w.from.After(next) && !w.to.Before(prev) {
			return true
		}
	}
	return false
}

// expected counts the deliveries expected of awaited tenants, and all.
func (l *ledger) expected() (awaited, all int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		all += int64(len(e.endpoints))
		if e.tenant.Await {
			awaited += int64(len(e.endpoints))
		}
	}
	return awaited, all
}

// expectedBy counts the deliveries expected of each awaited tenant.
func (l *ledger) expectedBy() map[*Tenant]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[*Tenant]int64{}
	for _, e := range l.events {
		if e.tenant.Await {
			out[e.tenant] += int64(len(e.endpoints))
		}
	}
	return out
}

// announcedAwaited is the number of webhook-ids the run waits for.
func (l *ledger) announcedAwaited() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.announced))
}

// unreceived counts the announced webhook-ids of awaited tenants that the
// receiver has not answered with a 2xx.
func (l *ledger) unreceived(r *Receiver) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got int64
	r.Lookup(l.announced, func(_ string, rec Record) {
		if rec.Successes > 0 {
			got++
		}
	})
	return int64(len(l.announced)) - got
}

// scope selects the events a count covers: those of the phases given
// (every phase when none are), and the receipts of unknown events first
// seen since then.
type scope struct {
	phases []int
	since  time.Time
	// latencyWithout leaves the deliveries of this ordering key out of
	// the latency figures (they are still counted and checked).
	latencyWithout string
}

func (s scope) has(phase int) bool { return len(s.phases) == 0 || slices.Contains(s.phases, phase) }

// tally is a count of the ledger against the receiver's records.
type tally struct {
	// Expected are the deliveries of awaited tenants the ledger expects;
	// Planned those of them the node announced; Deliveries those received
	// with a valid signature, a 2xx and the published bytes.
	Expected, Planned, Deliveries int64
	// Checks: Lost is the rest of Expected; the others count over every
	// tenant (BadSignature is the receiver's, not the ledger's).
	Checks
	// Attempts are the verified requests of the expected deliveries.
	Attempts int64
	// Examples name a few events behind the checks that are not 0.
	Examples []string

	examples               map[string]int  // examples given, by check
	firstAttempt, fromSent []time.Duration // per delivery received
	beforeAck              int64           // received before the publish was answered
	lastOK                 time.Time
}

// count tallies the events of sc against the receiver's records. A
// delivery counts as received when its endpoint's receiver answered 2xx
// to a request with a valid signature (the receiver refuses the others),
// the event's webhook-event-id and the published bytes. A duplicate (the
// same webhook-id answered 2xx again) is explained when it carries the
// published bytes and either the receiver knows the sender had gone before
// its previous answer, or a window the bench caused lies between the two
// receipts.
func (l *ledger) count(r *Receiver, sc scope) tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	type key struct {
		e   *entry
		pos int
	}
	type got struct {
		rec    Record
		oks    []Receipt
		bodies []uint64
	}
	var t tally
	recs := map[key]got{}
	r.Each(func(id string, rec *Record, oks []Receipt, bodies []uint64) {
		if rec.Endpoint == rawEndpoint {
			return
		}
		e := l.of(rec.Endpoint, rec.EventID)
		pos := -1
		if e != nil {
			pos = slices.Index(e.endpoints, rec.Endpoint)
		}
		if pos < 0 {
			if (e != nil && sc.has(e.phase)) || (e == nil && !rec.FirstSeen.Before(sc.since)) {
				t.Unplanned++
			}
			return
		}
		if !sc.has(e.phase) {
			return
		}
		k := key{e, pos}
		if _, dup := recs[k]; dup || (e.ids[pos] != "" && e.ids[pos] != id) {
			t.Unplanned++
			return
		}
		// The receipts are copied: the receiver appends to them after
		// the lock is released.
		recs[k] = got{rec: *rec, oks: slices.Clone(oks), bodies: slices.Clone(bodies)}
	})
	l.orderViolations(r, sc, &t)
	for _, e := range l.events {
		if !sc.has(e.phase) {
			continue
		}
		t.PlannedMismatch += int64(len(e.extra))
		if len(e.extra) > 0 {
			t.example("planned_mismatch: event %s: the node announced deliveries %v the bench does not expect", e.id, e.extra)
		}
		for pos := range e.endpoints {
			if e.ids[pos] == "" {
				t.PlannedMismatch++
				t.example("planned_mismatch: event %s: the node announced no delivery to endpoint %s (announced %v)", e.id, e.endpoints[pos], e.ids)
			}
			g, ok := recs[key{e, pos}]
			if ok {
				t.tallyReceived(l, e, g.rec, g.oks, g.bodies)
			}
			if !e.tenant.Await {
				continue
			}
			t.Expected++
			if e.ids[pos] != "" {
				t.Planned++
			}
			if !ok || !slices.ContainsFunc(g.oks, func(o Receipt) bool { return o.Body == e.body }) {
				t.Lost++
				t.example("lost: event %s to endpoint %s (webhook-id %q): %d attempts received, %d answered 2xx", e.id, e.endpoints[pos], e.ids[pos], g.rec.Attempts, len(g.oks))
				continue
			}
			t.Deliveries++
			if sc.latencyWithout != "" && e.key == sc.latencyWithout {
				continue
			}
			t.firstAttempt = append(t.firstAttempt, max(0, g.rec.FirstSeen.Sub(e.ack)))
			t.fromSent = append(t.fromSent, g.rec.FirstSeen.Sub(e.sent))
			if g.rec.FirstSeen.Before(e.ack) {
				t.beforeAck++
			}
			if g.rec.FirstOK.After(t.lastOK) {
				t.lastOK = g.rec.FirstOK
			}
		}
	}
	return t
}

// orderViolations checks the requests of every ordered delivery against
// the order its key's events were published in, for each endpoint that
// orders by key (ordered, by the bench's endpoint names): a request for an
// event must be for the key's first event not yet accepted, or a repeat of
// the last one accepted. Anything else (a later event before an earlier
// one was accepted, an older one again) is a violation. Only events of
// the scope's phases count, but every event moves its key on. l.mu must
// be held.
func (l *ledger) orderViolations(r *Receiver, sc scope, t *tally) {
	r.EachOrdered(func(endpoint, key string, arrivals []OrderedArrival) {
		tenant := l.tenants[endpoint]
		var order []string // the key's events this endpoint must receive
		for _, id := range l.keys[keyRef{tenant, key}] {
			if e := l.events[eventKey{tenant, id}]; e != nil && slices.Contains(e.endpoints, endpoint) {
				order = append(order, id)
			}
		}
		next := 0 // the first event of order not yet accepted
		for _, a := range arrivals {
			j := slices.Index(order, a.EventID)
			if j < 0 {
				continue
			}
			switch {
			case j == next:
				if a.OK {
					next++
				}
			case j == next-1: // a repeat of the last one accepted
			case !sc.has(l.events[eventKey{tenant, a.EventID}].phase):
				// Out of the scope: judged by a count that covers it.
			default:
				t.OrderViolations++
				t.example("order_violations: endpoint %s key %s: event %s (#%d of the key as published; webhook-sequence %d) arrived while #%d was the next due", endpoint, key, a.EventID, j+1, a.Sequence, next+1)
			}
		}
	})
}

// maxExamples bounds the examples of each check in a tally.
const maxExamples = 2

// example adds an example of the check the format starts with ("lost:
// ..."), up to maxExamples of each.
func (t *tally) example(format string, args ...any) {
	check, _, _ := strings.Cut(format, ":")
	if t.examples == nil {
		t.examples = map[string]int{}
	}
	if t.examples[check]++; t.examples[check] <= maxExamples {
		t.Examples = append(t.Examples, fmt.Sprintf(format, args...))
	}
}

// tallyReceived counts one expected delivery's bytes, attempts and
// duplicates.
func (t *tally) tallyReceived(l *ledger, e *entry, rec Record, oks []Receipt, bodies []uint64) {
	if slices.ContainsFunc(bodies, func(b uint64) bool { return b != e.body }) {
		t.BodyMismatch++
	}
	if e.tenant.Await {
		t.Attempts += int64(rec.Attempts)
	}
	for i := 1; i < len(oks); i++ {
		t.Duplicates++
		if oks[i].Body != e.body || !(oks[i-1].Cut || l.explains(oks[i-1].At, oks[i].At)) {
			t.Unexplained++
			t.example("duplicates_unexplained: event %s to endpoint %s: answered 2xx at %s and again at %s, no window of the bench between",
				e.id, rec.Endpoint, oks[i-1].At.Format("15:04:05.000"), oks[i].At.Format("15:04:05.000"))
		}
	}
}

// deliveryRef names a delivery of a tenant.
type deliveryRef struct{ tenant, id string }

// delivered returns up to n deliveries of awaited tenants that the node
// announced and the receiver answered 2xx: deliveries that exist.
func (l *ledger) delivered(r *Receiver, n int) []deliveryRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []deliveryRef
	for _, e := range l.events {
		if !e.tenant.Await {
			continue
		}
		var ids []string
		for _, id := range e.ids {
			if id != "" {
				ids = append(ids, id)
			}
		}
		r.Lookup(ids, func(id string, rec Record) {
			if rec.Successes > 0 && len(out) < n {
				out = append(out, deliveryRef{tenant: e.tenant.ID, id: id})
			}
		})
		if len(out) >= n {
			break
		}
	}
	return out
}

// arrivals returns, by endpoint, the first arrival of every expected
// delivery of awaited tenants received.
func (l *ledger) arrivals(r *Receiver) map[string][]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]time.Time{}
	r.Each(func(_ string, rec *Record, _ []Receipt, _ []uint64) {
		if e := l.of(rec.Endpoint, rec.EventID); e != nil && e.tenant.Await && slices.Contains(e.endpoints, rec.Endpoint) {
			out[rec.Endpoint] = append(out[rec.Endpoint], rec.FirstSeen)
		}
	})
	return out
}

// answers returns, by endpoint, when the publish of every expected
// delivery of awaited tenants was answered: the publishing side of the
// arrivals, so that a gap in an endpoint's arrivals can be told apart
// from a gap in what was published for it.
func (l *ledger) answers() map[string][]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]time.Time{}
	for _, e := range l.events {
		if !e.tenant.Await {
			continue
		}
		for _, ep := range e.endpoints {
			out[ep] = append(out[ep], e.ack)
		}
	}
	return out
}

// longestWait returns the longest time a delivery whose publish was
// answered in [from, to) waited from that answer to its first arrival,
// and the delivery; a delivery not received by the end counts until now.
// After a kill, it is how long the killed member's partitions went
// unserved: their deliveries published then wait for the takeover, the
// others arrive at once.
func (l *ledger) longestWait(r *Receiver, from, to, now time.Time) (time.Duration, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	acks := map[string]time.Time{}
	var ids []string
	for _, e := range l.events {
		if !e.tenant.Await || e.ack.Before(from) || !e.ack.Before(to) {
			continue
		}
		for _, id := range e.ids {
			if id != "" {
				acks[id] = e.ack
				ids = append(ids, id)
			}
		}
	}
	seen := map[string]time.Time{}
	r.Lookup(ids, func(id string, rec Record) { seen[id] = rec.FirstSeen })
	var longest time.Duration
	var which string
	for _, id := range ids {
		first := seen[id]
		if first.IsZero() {
			first = now // not received (yet)
		}
		if d := first.Sub(acks[id]); d > longest {
			longest, which = d, id
		}
	}
	return longest, which
}

// slowAttempt is one delivery whose first attempt was slow: when its
// publish was answered (since the origin given to slow), how long its first
// attempt came after, and its endpoint (the receiver's name for it).
type slowAttempt struct {
	At, Delay time.Duration
	Endpoint  string
	// Tenant and ID name the delivery; Ack is when its publish was
	// answered and FirstSeen when its first attempt arrived.
	Tenant, ID     string
	Ack, FirstSeen time.Time
	Via            string // the node that answered the publish
}

// slow counts the deliveries of phase whose first attempt came more than
// over after their publish was answered, by the whole second of that
// answer since origin: where in a run the tail of the first-attempt
// latency was made. list holds each of them, by the time of its answer.
func (l *ledger) slow(r *Receiver, phase int, over time.Duration, origin time.Time) (bySecond map[int]int, total int, list []slowAttempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bySecond = map[int]int{}
	r.Each(func(id string, rec *Record, _ []Receipt, _ []uint64) {
		e := l.of(rec.Endpoint, rec.EventID)
		if e == nil || e.phase != phase || rec.FirstSeen.IsZero() {
			return
		}
		total++
		if d := rec.FirstSeen.Sub(e.ack); d > over {
			bySecond[int(e.ack.Sub(origin)/time.Second)]++
			list = append(list, slowAttempt{At: e.ack.Sub(origin), Delay: d, Endpoint: rec.Endpoint,
				Tenant: e.tenant.ID, ID: id, Ack: e.ack, FirstSeen: rec.FirstSeen, Via: e.via})
		}
	})
	slices.SortFunc(list, func(a, b slowAttempt) int { return cmp.Compare(a.At, b.At) })
	return bySecond, total, list
}
