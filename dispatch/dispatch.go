package dispatch

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hookline/hookline/projections/due"
)

// Defaults of the zero Config.
const (
	DefaultSlots        = 256
	DefaultObjective    = time.Second
	DefaultWeightTTL    = time.Second
	DefaultHangHalfLife = 15 * time.Minute
)

// hangWeight is the weight of one attempt in a tenant's share of timed-out
// attempts (an exponential moving average): sixteen answers in a row take a
// tenant whose attempts all timed out back to about two thirds of its cap,
// forty to nine tenths.
const hangWeight = 1.0 / 16

// Config configures a [Dispatcher]. The zero value is valid and means the
// defaults below.
type Config struct {
	// Slots is the number of attempts the node runs at once; 0 means
	// DefaultSlots (256).
	Slots int
	// Objective is how long a new delivery may wait for a slot before
	// retries stop borrowing slots; 0 means DefaultObjective (1 s).
	Objective time.Duration
	// TenantCap is the most slots one tenant holds at once; 0 means three
	// quarters of Slots (at least 1).
	TenantCap int
	// HangFloor is the most slots a tenant whose attempts all time out
	// holds at once; 0 means a sixteenth of Slots (at least 1). Between
	// the two, a tenant's cap shrinks with the share of its recent attempts
	// that timed out (see [Dispatcher.Release]): a slot held by an attempt
	// that waits for its timeout serves nobody, and the timeouts of many
	// such attempts end together and start as many again at once.
	HangFloor int
	// HangHalfLife is how long it takes a tenant's share of timed-out
	// attempts to fade by half while none of its attempts ends; 0 means
	// DefaultHangHalfLife (15 min). The share outlives the moments when
	// the tenant holds and waits for nothing, so a hanging tenant whose
	// attempts come in waves (circuits that open and probe together)
	// starts each wave near HangFloor, not at TenantCap.
	HangHalfLife time.Duration
	// Weight returns a tenant's share (its quota's weight); nil, or a value
	// below 1, means 1. It is called with the dispatcher's lock held and
	// must not call back into the dispatcher. The dispatcher asks it at most
	// once per WeightTTL for a tenant with requests or slots, so a changed
	// quota takes effect within that time.
	Weight func(tenantID string) int
	// WeightTTL is how long a tenant's weight is used before Weight is asked
	// again; 0 means DefaultWeightTTL (1 s).
	WeightTTL time.Duration
	// Now is the clock that ages waiting requests; nil means time.Now.
	Now func() time.Time
}

// Validate reports negative fields.
func (c Config) Validate() error {
	if c.Slots < 0 || c.Objective < 0 || c.TenantCap < 0 || c.HangFloor < 0 || c.HangHalfLife < 0 || c.WeightTTL < 0 {
		return errors.New("dispatch: config: slots, objective, tenant cap, hang floor, hang half-life and weight TTL must not be negative; use 0 for the defaults")
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.Slots = cmp.Or(c.Slots, DefaultSlots)
	c.Objective = cmp.Or(c.Objective, DefaultObjective)
	c.TenantCap = cmp.Or(c.TenantCap, max(c.Slots*3/4, 1))
	c.HangFloor = min(cmp.Or(c.HangFloor, max(c.Slots/16, 1)), c.TenantCap)
	c.HangHalfLife = cmp.Or(c.HangHalfLife, DefaultHangHalfLife)
	c.WeightTTL = cmp.Or(c.WeightTTL, DefaultWeightTTL)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Dispatcher shares the node's attempt slots among tenants (see the package
// documentation for the policy). It is safe for concurrent use by all the
// grains of a node; its zero value is not usable: build it with [New].
type Dispatcher struct {
	cfg Config

	// mu guards every field below and the tenants and endpoints they hold.
	mu      sync.Mutex
	used    int
	tenants map[string]*tenant
	ring    []*tenant // tenants with waiting requests, in DRR order
	next    int       // index in ring of the tenant being served
	arrived bool      // the current tenant got its quantum for this visit
	// idle keeps the hang of tenants forgotten while it still lowers their
	// cap; pruned when it has doubled since the last pruning (pruneAt).
	idle    map[string]hang
	pruneAt int
}

// hang is a tenant's share of its recent attempts that timed out (an
// exponential moving average over attempts), as of at: it fades with time
// by half per Config.HangHalfLife.
type hang struct {
	share float64
	at    time.Time
}

type tenant struct {
	id        string
	weight    int       // cached Config.Weight, asked at weighed
	weighed   time.Time // zero: not asked yet
	deficit   int
	held      int
	hung      hang // share of its recent attempts that timed out
	endpoints map[string]*endpoint
	ring      []*endpoint // endpoints with waiting requests
	next      int
}

type endpoint struct {
	id      string
	held    int
	waiting [2][]waiter // by due.Class, oldest first
}

type waiter struct {
	at    time.Time
	grant func()
}

// New returns a dispatcher. It panics if cfg does not validate (a
// programmer error at start-up).
func New(cfg Config) *Dispatcher {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Dispatcher{cfg: cfg.withDefaults(), tenants: map[string]*tenant{}, idle: map[string]hang{}, pruneAt: minPruneAt}
}

// Acquire asks for one slot for an attempt of class c (new deliveries
// come ahead of retries) by endpointID of
// tenantID. grant is called once the slot is the caller's, maybe before
// Acquire returns, from whichever goroutine freed the slot; it must not
// block (send a message) and must not call the dispatcher. The holder gives
// the slot back with Release.
func (d *Dispatcher) Acquire(tenantID, endpointID string, c due.Class, grant func()) {
	d.mu.Lock()
	t := d.tenants[tenantID]
	if t == nil {
		t = &tenant{id: tenantID, endpoints: map[string]*endpoint{}}
		if h, ok := d.idle[tenantID]; ok {
			t.hung = d.faded(h, d.cfg.Now())
			delete(d.idle, tenantID)
		}
		d.tenants[tenantID] = t
	}
	e := t.endpoints[endpointID]
	if e == nil {
		e = &endpoint{id: endpointID}
		t.endpoints[endpointID] = e
	}
	if !e.waits() {
		t.ring = append(t.ring, e)
		if len(t.ring) == 1 {
			d.ring = append(d.ring, t)
		}
	}
	e.waiting[c&1] = append(e.waiting[c&1], waiter{at: d.cfg.Now(), grant: grant})
	d.unlockGrant(d.dispatch())
}

// Promote turns up to n of the requests for retries that endpointID of
// tenantID is waiting for (the oldest first) into requests for new work:
// they keep their grants and wait as new work from now on. A grain whose
// new deliveries are ready while its requests wait as retries calls it, so
// that waiting retries (held back while new work on the node is late)
// never stand in the way of its new work. Promote does nothing when the
// endpoint waits for no retry.
func (d *Dispatcher) Promote(tenantID, endpointID string, n int) {
	d.mu.Lock()
	var granted []func()
	if t := d.tenants[tenantID]; t != nil {
		if e := t.endpoints[endpointID]; e != nil && n > 0 && len(e.waiting[due.ClassRetry]) > 0 {
			n = min(n, len(e.waiting[due.ClassRetry]))
			now := d.cfg.Now()
			for _, w := range e.waiting[due.ClassRetry][:n] {
				e.waiting[due.ClassNew] = append(e.waiting[due.ClassNew], waiter{at: now, grant: w.grant})
			}
			e.waiting[due.ClassRetry] = append(e.waiting[due.ClassRetry][:0], e.waiting[due.ClassRetry][n:]...)
			granted = d.dispatch()
		}
	}
	d.unlockGrant(granted)
}

// Outcome is what became of the attempt a slot was held for, as
// [Dispatcher.Release] counts it.
type Outcome int

const (
	// Unused: the slot went back without an attempt.
	Unused Outcome = iota
	// Answered: the attempt ended before its timeout (whatever the answer:
	// a refusal or an error status frees the slot at once too).
	Answered
	// TimedOut: the attempt held its slot until its timeout.
	TimedOut
)

// Release gives back one slot held by endpointID of tenantID, for an
// attempt that ended with o. A tenant's cap follows the share of its
// attempts that time out: from TenantCap when none does down to HangFloor
// when all do, and back as its attempts are answered again.
func (d *Dispatcher) Release(tenantID, endpointID string, o Outcome) {
	d.mu.Lock()
	if t := d.tenants[tenantID]; t != nil {
		switch o {
		case Answered:
			t.hung = d.faded(t.hung, d.cfg.Now())
			t.hung.share -= t.hung.share * hangWeight
		case TimedOut:
			t.hung = d.faded(t.hung, d.cfg.Now())
			t.hung.share += (1 - t.hung.share) * hangWeight
		}
		if e := t.endpoints[endpointID]; e != nil && e.held > 0 {
			e.held--
			t.held--
			d.used--
			d.forget(t, e)
		}
	}
	d.unlockGrant(d.dispatch())
}

// capOf is the most slots t may hold: its share of timed-out attempts as
// of its last attempt's end (the time it has faded since is taken into
// account at the next end, and when it comes back after being forgotten).
// d.mu must be held.
func (d *Dispatcher) capOf(t *tenant) int {
	return max(d.cfg.TenantCap-d.cut(t.hung.share), d.cfg.HangFloor)
}

// cut is how many slots a share of timed-out attempts takes off the cap.
func (d *Dispatcher) cut(share float64) int {
	return int(share*float64(d.cfg.TenantCap-d.cfg.HangFloor) + 0.5)
}

// faded returns h as of now: its share halved for every HangHalfLife since
// it was last updated.
func (d *Dispatcher) faded(h hang, now time.Time) hang {
	if h.share == 0 || !now.After(h.at) {
		return hang{share: h.share, at: now}
	}
	return hang{share: h.share * math.Exp2(-float64(now.Sub(h.at))/float64(d.cfg.HangHalfLife)), at: now}
}

// Leave drops the requests endpointID of tenantID is waiting for and gives
// back every slot it holds: a grain calls it when it stops, so that slots
// granted while it was stopping are not lost.
func (d *Dispatcher) Leave(tenantID, endpointID string) {
	d.mu.Lock()
	if t := d.tenants[tenantID]; t != nil {
		if e := t.endpoints[endpointID]; e != nil {
			d.used -= e.held
			t.held -= e.held
			e.held = 0
			e.waiting = [2][]waiter{}
			t.remove(e)
			if len(t.ring) == 0 {
				d.drop(t)
			}
			d.forget(t, e)
		}
	}
	d.unlockGrant(d.dispatch())
}

// Stats is a snapshot of the dispatcher, for metrics and tests.
type Stats struct {
	Used, Slots int
	// Waiting counts the requests waiting, by class.
	Waiting [2]int
	// OldestNew is how long the oldest new request has waited.
	OldestNew time.Duration
}

// Stats returns a snapshot.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Stats{Used: d.used, Slots: d.cfg.Slots}
	for _, t := range d.ring {
		for _, e := range t.ring {
			s.Waiting[due.ClassNew] += len(e.waiting[due.ClassNew])
			s.Waiting[due.ClassRetry] += len(e.waiting[due.ClassRetry])
		}
	}
	if at, ok := d.oldestNew(); ok {
		s.OldestNew = d.cfg.Now().Sub(at)
	}
	return s
}

// TenantStats is one tenant's part of the dispatcher now.
type TenantStats struct {
	TenantID string
	// Held counts the slots it holds; Cap is the most it may hold now
	// (below TenantCap while its attempts time out); AtCap says Held
	// reached it.
	Held, Cap int
	AtCap     bool
	// Waiting counts its requests waiting, by class.
	Waiting [2]int
}

// Tenants returns the tenants that wait for a slot or hold the cap, in no
// particular order: the tenants the dispatcher holds back now, for
// metrics. Their number is bounded by the tenants with work on the node.
func (d *Dispatcher) Tenants() []TenantStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []TenantStats
	for _, t := range d.tenants {
		c := d.capOf(t)
		ts := TenantStats{TenantID: t.id, Held: t.held, Cap: c, AtCap: t.held >= c}
		for _, e := range t.ring {
			ts.Waiting[due.ClassNew] += len(e.waiting[due.ClassNew])
			ts.Waiting[due.ClassRetry] += len(e.waiting[due.ClassRetry])
		}
		if ts.AtCap || ts.Waiting != [2]int{} {
			out = append(out, ts)
		}
	}
	return out
}

// unlockGrant releases d.mu, then calls the grants that dispatch handed
// out: a grant must not run under the lock.
func (d *Dispatcher) unlockGrant(granted []func()) {
	d.mu.Unlock()
	for _, g := range granted {
		g()
	}
}

// dispatch hands out free slots and returns the grants to call once the
// lock is released. d.mu must be held.
func (d *Dispatcher) dispatch() []func() {
	var granted []func()
	for d.used < d.cfg.Slots {
		w, ok := d.pick()
		if !ok {
			break
		}
		granted = append(granted, w.grant)
	}
	return granted
}

// pick takes the next waiter by the policy and counts its slot. d.mu must
// be held.
func (d *Dispatcher) pick() (waiter, bool) {
	retries := true
	now := d.cfg.Now()
	if at, ok := d.oldestGrantableNew(); ok && now.Sub(at) >= d.cfg.Objective {
		retries = false // new work is late: every slot goes to it
	}
	for range 2*len(d.ring) + 1 {
		if len(d.ring) == 0 {
			return waiter{}, false
		}
		d.next %= len(d.ring)
		t := d.ring[d.next]
		e := t.pick(retries, d.capOf(t))
		if e == nil {
			d.advance()
			continue
		}
		if !d.arrived {
			w := d.weight(t, now)
			t.deficit = min(t.deficit+w, 2*w)
			d.arrived = true
		}
		if t.deficit < 1 {
			d.advance()
			continue
		}
		t.deficit--
		c := due.ClassNew
		if len(e.waiting[due.ClassNew]) == 0 {
			c = due.ClassRetry
		}
		w := e.waiting[c][0]
		e.waiting[c] = e.waiting[c][1:]
		e.held++
		t.held++
		d.used++
		if !e.waits() {
			t.remove(e)
			if len(t.ring) == 0 {
				d.drop(t) // the next tenant moved into its place
				return w, true
			}
		}
		if t.deficit < 1 {
			d.advance()
		}
		return w, true
	}
	return waiter{}, false
}

// advance moves the round to the next tenant.
func (d *Dispatcher) advance() {
	d.next++
	d.arrived = false
}

// drop removes a tenant without waiting requests from the ring; DRR forgets
// the deficit of a tenant whose queue emptied.
func (d *Dispatcher) drop(t *tenant) {
	i := slices.Index(d.ring, t)
	if i < 0 {
		return
	}
	d.ring = slices.Delete(d.ring, i, i+1)
	t.deficit = 0
	switch {
	case i < d.next:
		d.next--
	case i == d.next:
		d.arrived = false
	}
}

// forget frees the records of an endpoint (and tenant) that holds and waits
// for nothing.
func (d *Dispatcher) forget(t *tenant, e *endpoint) {
	if e.held == 0 && !e.waits() {
		delete(t.endpoints, e.id)
	}
	if len(t.endpoints) == 0 && t.held == 0 {
		delete(d.tenants, t.id)
		d.remember(t.id, t.hung)
	}
}

// minPruneAt is the fewest idle records at which remember prunes.
const minPruneAt = 64

// remember keeps the hang of a tenant being forgotten while it still takes
// a slot off its cap. The records are pruned of those that faded when
// their number has doubled since the last pruning, so that they stay
// bounded by the tenants that hung within a few hours. d.mu must be held.
func (d *Dispatcher) remember(tenantID string, h hang) {
	if d.cut(h.share) == 0 {
		return
	}
	d.idle[tenantID] = h
	if len(d.idle) < d.pruneAt {
		return
	}
	now := d.cfg.Now()
	for id, h := range d.idle {
		if d.cut(d.faded(h, now).share) == 0 {
			delete(d.idle, id)
		}
	}
	d.pruneAt = max(2*len(d.idle), minPruneAt)
}

// weight returns t's weight as of now, asking Config.Weight when the cached
// one is older than WeightTTL: it reads the registry, and runs under d.mu
// for every visit of a tenant. d.mu must be held.
func (d *Dispatcher) weight(t *tenant, now time.Time) int {
	if d.cfg.Weight == nil {
		return 1
	}
	if t.weighed.IsZero() || now.Sub(t.weighed) >= d.cfg.WeightTTL || now.Before(t.weighed) {
		t.weight, t.weighed = max(d.cfg.Weight(t.id), 1), now
	}
	return t.weight
}

// oldestNew returns when the oldest waiting new request was made.
func (d *Dispatcher) oldestNew() (time.Time, bool) { return d.oldestNewOf(false) }

// oldestGrantableNew returns when the oldest waiting new request of a
// tenant below its cap was made: only such work may hold retries back, as
// a slot freed now could go to it. New work of a tenant at its cap waits
// for that tenant's own slots, however late it is.
func (d *Dispatcher) oldestGrantableNew() (time.Time, bool) { return d.oldestNewOf(true) }

func (d *Dispatcher) oldestNewOf(grantable bool) (time.Time, bool) {
	var oldest time.Time
	for _, t := range d.ring {
		if grantable && t.held >= d.capOf(t) {
			continue
		}
		for _, e := range t.ring {
			if len(e.waiting[due.ClassNew]) > 0 && (oldest.IsZero() || e.waiting[due.ClassNew][0].at.Before(oldest)) {
				oldest = e.waiting[due.ClassNew][0].at
			}
		}
	}
	return oldest, !oldest.IsZero()
}

// waits reports whether the endpoint waits for a slot.
func (e *endpoint) waits() bool {
	return len(e.waiting[due.ClassNew])+len(e.waiting[due.ClassRetry]) > 0
}

// pick returns the tenant's next endpoint, round robin, with a request it
// may serve: a new one, or a retry when retries are allowed; nil when none
// or when the tenant holds its cap.
func (t *tenant) pick(retries bool, tenantCap int) *endpoint {
	if t.held >= tenantCap {
		return nil
	}
	for range len(t.ring) {
		t.next %= len(t.ring)
		e := t.ring[t.next]
		t.next++
		if len(e.waiting[due.ClassNew]) > 0 || (retries && len(e.waiting[due.ClassRetry]) > 0) {
			return e
		}
	}
	return nil
}

// remove takes an endpoint without waiting requests out of the tenant's
// round.
func (t *tenant) remove(e *endpoint) {
	i := slices.Index(t.ring, e)
	if i < 0 {
		return
	}
	t.ring = slices.Delete(t.ring, i, i+1)
	if i < t.next {
		t.next--
	}
}
