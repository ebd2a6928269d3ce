package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// A chaos run's schedule is made whole, before anything starts, by a PRNG
// seeded with --seed: every action, its time from the start and its
// parameters. The same seed, duration and node count give the same
// schedule (its digest says so); only the answers differ from run to run.
// Actions that name a delivery (a replay) name it by its rank among what
// the receiver had then, and the run's trace records which one it was.

// chaosKind is what one action does.
type chaosKind string

const (
	actPublish   chaosKind = "publish"        // a batch to a tenant, ordered or not
	actRepublish chaosKind = "republish"      // an earlier batch of the lane again, as a relay that died would
	actURL       chaosKind = "url"            // the endpoint's URL: another host, or another query
	actHeaders   chaosKind = "secret-headers" // the endpoint's secret header gets a new value
	actRotate    chaosKind = "rotate"         // a new signing secret
	actPause     chaosKind = "pause"
	actResume    chaosKind = "resume"
	actPull      chaosKind = "pull"       // push to pull
	actPush      chaosKind = "push"       // pull to push
	actOutage    chaosKind = "outage"     // the endpoint's receiver answers 503
	actOutageEnd chaosKind = "outage-end" // and 2xx again
	actErase     chaosKind = "erase"      // the tenant's payloads are erased
	actReplay    chaosKind = "replay"     // a delivery the endpoint received, replayed
	actRecover   chaosKind = "recover"    // a window recovery of the endpoint's recent deliveries
	actKill      chaosKind = "kill"       // kill -9 a node, start it again after a while
	actTerm      chaosKind = "sigterm"    // stop a node gracefully, start it again
	actRebuild   chaosKind = "rebuild"    // stop a node, remove its projections (a replaced disk), start it
	actPGRestart chaosKind = "pg-restart" // PostgreSQL crashes and recovers
	actJoin      chaosKind = "join"       // a member joins the cluster
)

// The lanes of a schedule: each runs its actions one after another, in
// time order; lanes run side by side. A key is published by one lane only,
// so its events are published in the schedule's order.
const (
	lanePublish0 = iota
	lanePublish1
	laneConfig
	laneTenant // erasures, replays, recoveries
	laneProcess
	chaosLanes
)

// Shape of the world a schedule acts on: chaosTenants tenants of
// len(chaosRoles) endpoints each; chaosKeys ordering keys per publishing
// lane.
const (
	chaosTenants = 3
	chaosKeys    = 12
)

// chaosAction is one action of a schedule. Fields that do not apply to
// its kind are -1 (indexes) or zero.
type chaosAction struct {
	N        int           // its rank in the schedule
	At       time.Duration // from the start of the run
	Lane     int
	Kind     chaosKind
	Tenant   int // index, -1 none
	Endpoint int // index within the tenant, -1 none
	Node     int // index, -1 none
	// Events, Type, Keys and Violate: a publish of Events events of the
	// tenant's Type-th type; Keys[i] is event i's ordering key within the
	// lane (-1: none); Violate makes the payloads break their schema.
	Events  int
	Type    int
	Keys    []int
	Violate bool
	// Host (0 or 1) and Query make a URL; WithHeaders sets a secret header
	// value (Value) in the same call.
	Host, Query int
	WithHeaders bool
	Value       int
	// For is how long a kill keeps the node down, or how far back a
	// recovery's window reaches.
	For time.Duration
	// Pick chooses among what exists when the action runs: the delivery a
	// replay takes, the earlier publish a republish repeats (its N).
	Pick int
	// Status is the statuses a recovery replays.
	Status string
}

// String is the action as the schedule and the trace print it.
func (a chaosAction) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d +%.3fs %s", a.N, a.At.Seconds(), a.Kind)
	if a.Tenant >= 0 {
		fmt.Fprintf(&b, " t%d", a.Tenant)
	}
	if a.Endpoint >= 0 {
		fmt.Fprintf(&b, " e%d", a.Endpoint)
	}
	if a.Node >= 0 {
		fmt.Fprintf(&b, " node%d", a.Node+1)
	}
	switch a.Kind {
	case actPublish:
		fmt.Fprintf(&b, " type%d ×%d", a.Type, a.Events)
		if slices.ContainsFunc(a.Keys, func(k int) bool { return k >= 0 }) {
			fmt.Fprintf(&b, " keys %v", a.Keys)
		}
		if a.Violate {
			b.WriteString(" violating its schema")
		}
	case actRepublish:
		fmt.Fprintf(&b, " of #%d", a.Pick)
	case actURL:
		fmt.Fprintf(&b, " host%d ?v=%d", a.Host, a.Query)
		if a.WithHeaders {
			fmt.Fprintf(&b, " with secret header value %d", a.Value)
		}
	case actHeaders:
		fmt.Fprintf(&b, " value %d", a.Value)
	case actKill:
		fmt.Fprintf(&b, " down %v", a.For)
	case actReplay:
		fmt.Fprintf(&b, " pick %d", a.Pick)
	case actRecover:
		fmt.Fprintf(&b, " %s of the last %v", a.Status, a.For)
	}
	return b.String()
}

// touches reports whether the action acts on the tenant's endpoint (or the
// tenant as a whole, or every tenant: the nodes, the database).
func (a chaosAction) touches(tenant, endpoint int) bool {
	switch {
	case a.Node >= 0 || a.Kind == actPGRestart || a.Kind == actJoin:
		return true
	case a.Tenant != tenant:
		return false
	}
	return a.Endpoint < 0 || endpoint < 0 || a.Endpoint == endpoint
}

// chaosSchedule is a whole schedule.
type chaosSchedule struct {
	Seed     int64
	Duration time.Duration
	Nodes    int
	Actions  []chaosAction
}

// Digest is a short hash of the schedule's text: two runs with the same
// digest played the same schedule.
func (s chaosSchedule) Digest() string {
	h := sha256.New()
	for _, a := range s.Actions {
		fmt.Fprintln(h, a.String())
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// byKind counts the actions of each kind.
func (s chaosSchedule) byKind() map[chaosKind]int {
	out := map[chaosKind]int{}
	for _, a := range s.Actions {
		out[a.Kind]++
	}
	return out
}

// faultsFrom and faultsUntil bound, as fractions of the duration, when
// anything but publishing happens: a quiet start while the load begins,
// and a quiet end, so that what the faults left waiting drains.
const (
	faultsFrom  = 0.05
	faultsUntil = 0.80
)

// chaosGen is the state of a schedule being made.
type chaosGen struct {
	rng   *rand.Rand
	d     time.Duration
	nodes int
	acts  []chaosAction
}

// newChaosSchedule makes the schedule of a seed for a run of d on nodes
// nodes (1: one node on the embedded log; more: a cluster on PostgreSQL).
func newChaosSchedule(seed int64, d time.Duration, nodes int) chaosSchedule {
	g := &chaosGen{rng: rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15)), d: d, nodes: nodes}
	g.publishing(lanePublish0)
	g.publishing(lanePublish1)
	g.config()
	g.tenant()
	g.process()
	slices.SortStableFunc(g.acts, func(a, b chaosAction) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Lane, b.Lane))
	})
	for i := range g.acts {
		g.acts[i].N = i + 1
	}
	// A republish names the publish it repeats by that publish's rank.
	rank := map[int]int{} // Pick as made (the index of the publish among acts before sorting) -> N
	for _, a := range g.acts {
		if a.Kind == actPublish {
			rank[a.Pick] = a.N
		}
	}
	for i, a := range g.acts {
		switch a.Kind {
		case actRepublish:
			g.acts[i].Pick = rank[a.Pick]
		case actPublish:
			g.acts[i].Pick = 0
		}
	}
	return chaosSchedule{Seed: seed, Duration: d, Nodes: nodes, Actions: g.acts}
}

func (g *chaosGen) add(a chaosAction) {
	g.acts = append(g.acts, a)
}

// between is a duration drawn evenly from [lo, hi), in whole
// milliseconds.
func (g *chaosGen) between(lo, hi time.Duration) time.Duration {
	return (lo + time.Duration(g.rng.Int64N(int64(hi-lo)))).Truncate(time.Millisecond)
}

// none is an action of no tenant, endpoint or node.
func none(lane int, at time.Duration, k chaosKind) chaosAction {
	return chaosAction{Lane: lane, At: at, Kind: k, Tenant: -1, Endpoint: -1, Node: -1}
}

// publishing fills a publishing lane: a batch every 0.2 to 0.8 s, of 1 to
// 8 events (one in ten up to 40), half of them ordered by key, one in ten
// breaking its type's schema, one in twenty a republish of the lane's
// previous batch.
func (g *chaosGen) publishing(lane int) {
	last := -1 // the lane's last publish, by its index in g.acts
	for at := g.between(0, 500*time.Millisecond); at < g.d; at += g.between(200*time.Millisecond, 800*time.Millisecond) {
		if last >= 0 && g.rng.IntN(20) == 0 {
			a := none(lane, at, actRepublish)
			a.Tenant, a.Pick = g.acts[last].Tenant, last
			g.add(a)
			continue
		}
		a := none(lane, at, actPublish)
		a.Tenant = g.rng.IntN(chaosTenants)
		a.Type = g.rng.IntN(len(chaosRoles))
		a.Events = 1 + g.rng.IntN(8)
		if g.rng.IntN(10) == 0 {
			a.Events = 1 + g.rng.IntN(40)
		}
		ordered := g.rng.IntN(2) == 0
		if ordered {
			a.Events = min(a.Events, chaosKeys) // a key at most once per batch
			a.Keys = g.rng.Perm(chaosKeys)[:a.Events]
		}
		a.Violate = g.rng.IntN(10) == 0
		a.Pick = len(g.acts) // its own index, for republishes (made a rank below)
		last = len(g.acts)
		g.add(a)
	}
}

// faultTime is a time drawn in the part of the run that has faults.
func (g *chaosGen) faultTimes(every time.Duration, f func(at time.Duration)) {
	from, until := time.Duration(faultsFrom*float64(g.d)), time.Duration(faultsUntil*float64(g.d))
	for at := from + g.between(0, every); at < until; at += g.between(every/2, every*3/2) {
		f(at)
	}
}

// config fills the configuration lane: every 2 s on average, one change
// of one endpoint that its role allows; pauses and outages end 2 to 12 s
// later.
func (g *chaosGen) config() {
	held := map[[2]int]time.Duration{} // an endpoint paused or out, until
	pulled := map[[2]int]bool{}
	g.faultTimes(2*time.Second, func(at time.Duration) {
		t, e := g.rng.IntN(chaosTenants), g.rng.IntN(len(chaosRoles))
		role, k := chaosRoles[e], [2]int{t, e}
		a := none(laneConfig, at, "")
		a.Tenant, a.Endpoint = t, e
		var kinds []chaosKind
		if held[k] <= at {
			kinds = append(kinds, actPause)
			if !pulled[k] {
				kinds = append(kinds, actOutage)
			}
		}
		if role.moves {
			kinds = append(kinds, actURL, actURL)
		}
		if role.secretHeaders {
			kinds = append(kinds, actHeaders)
		}
		if role.pulls {
			kinds = append(kinds, actPull)
		}
		kinds = append(kinds, actRotate)
		a.Kind = kinds[g.rng.IntN(len(kinds))]
		switch a.Kind {
		case actPause, actOutage:
			end := actResume
			if a.Kind == actOutage {
				end = actOutageEnd
			}
			back := none(laneConfig, at+g.between(2*time.Second, 12*time.Second), end)
			back.Tenant, back.Endpoint = t, e
			held[k] = back.At
			g.add(back)
		case actURL:
			a.Host, a.Query = g.rng.IntN(2), g.rng.IntN(1000)
			if role.secretHeaders && g.rng.IntN(2) == 0 {
				a.WithHeaders, a.Value = true, g.rng.IntN(1000)
			}
		case actHeaders:
			a.Value = g.rng.IntN(1000)
		case actPull:
			if pulled[k] {
				a.Kind = actPush
			}
			pulled[k] = !pulled[k]
		}
		g.add(a)
	})
}

// tenant fills the tenants' lane: a replay every 3 s on average, a
// recovery every 15 s, and an erasure of a tenant every 40 s (at least
// one per run).
func (g *chaosGen) tenant() {
	g.faultTimes(3*time.Second, func(at time.Duration) {
		a := none(laneTenant, at, actReplay)
		a.Tenant, a.Endpoint, a.Pick = g.rng.IntN(chaosTenants), g.rng.IntN(len(chaosRoles)), g.rng.IntN(1000)
		g.add(a)
	})
	g.faultTimes(15*time.Second, func(at time.Duration) {
		a := none(laneTenant, at, actRecover)
		a.Tenant, a.Endpoint = g.rng.IntN(chaosTenants), g.rng.IntN(len(chaosRoles))
		a.For, a.Status = g.between(5*time.Second, 30*time.Second), []string{"succeeded", "failed"}[g.rng.IntN(2)]
		g.add(a)
	})
	erased := false
	g.faultTimes(40*time.Second, func(at time.Duration) {
		a := none(laneTenant, at, actErase)
		a.Tenant = g.rng.IntN(chaosTenants)
		g.add(a)
		erased = true
	})
	if !erased {
		a := none(laneTenant, time.Duration(0.4*float64(g.d)), actErase)
		a.Tenant = g.rng.IntN(chaosTenants)
		g.add(a)
	}
}

// process fills the process lane: every 12 s on average a kill -9 (down
// 1 to 6 s), a SIGTERM or a rebuild of a node; on a cluster also
// PostgreSQL restarts and, once, in the middle of the run, a member
// joining (the nodes after it may be acted on too).
func (g *chaosGen) process() {
	kinds := []chaosKind{actKill, actKill, actTerm, actRebuild}
	if g.nodes > 1 {
		kinds = append(kinds, actPGRestart)
	}
	nodes := g.nodes
	joinAt := time.Duration(-1)
	if g.nodes > 1 {
		joinAt = g.between(time.Duration(0.3*float64(g.d)), time.Duration(0.5*float64(g.d)))
		g.add(none(laneProcess, joinAt, actJoin))
	}
	g.faultTimes(12*time.Second, func(at time.Duration) {
		if joinAt >= 0 && at > joinAt {
			nodes = g.nodes + 1
		}
		a := none(laneProcess, at, kinds[g.rng.IntN(len(kinds))])
		if a.Kind != actPGRestart {
			a.Node = g.rng.IntN(nodes)
		}
		if a.Kind == actKill {
			a.For = g.between(time.Second, 6*time.Second)
		}
		g.add(a)
	})
}
