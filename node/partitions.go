package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/operational"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/owners"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Timing of the partition manager.
const (
	// partitionStep is how often the manager looks again without a cause
	// (a drain's progress, a lost message); changes of the members, of the
	// table and messages wake it at once.
	partitionStep = 100 * time.Millisecond
	// readyEvery is how often a target tells a partition's owner that it
	// is ready to take it, while the move is pending; readyFor is how long
	// the owner takes it at its word.
	readyEvery = time.Second
	readyFor   = 3 * readyEvery
	// readyLag is how far behind the log, in the age of the last record
	// its projections applied, a member may be and still tell an owner it
	// is ready to take a partition: a member that has just joined, or has
	// just restarted, has its partitions live as soon as they reach its own
	// main lane, which may still be replaying what it missed and trail the
	// log. The new owner's grains start once its projections apply the
	// hand-over's record, so its lag then is the move's pause: the bound is
	// a quarter of a second, about twice the lag of a member under steady
	// load (one that stays above it takes partitions only once it is not,
	// or when their owner's leave runs out of leaveWait).
	readyLag = 250 * time.Millisecond
	// leaveWait is how long a leaving member keeps serving a partition
	// whose target has not said it is ready before it hands it over
	// anyway: a target that restarted a moment ago still replays what it
	// missed, and a hand-over to it pauses the partition for its lag.
	leaveWait = 5 * time.Second
	// lagEvery is how often the lag is read again (a read of the log's
	// head) while this member has partitions to ask for.
	lagEvery = 500 * time.Millisecond
	// drainPoll is how often a drain under way is looked at again: the
	// partition's new deliveries wait for it.
	drainPoll = 10 * time.Millisecond
	// failoverKeep is how recent a cause must be for its operational entry
	// to be emitted again by a member that takes a partition over from a
	// member that died (which may not have emitted it).
	failoverKeep = time.Minute
	// failoverBackoff is how long a member that was taken for dead, and
	// whose partitions were taken over, leaves them to their new owner even
	// if it does not see that owner either (a split brain: two groups of
	// members on one log, each seeing the other as dead): without it, the
	// two would take the partitions from each other at every step.
	failoverBackoff = 10 * time.Second
	// standbyDelay is how long a member that left keeps its place as a
	// standby in every other member's reckoning: its partitions' owners
	// change at once, but no member starts following them as a new
	// standby, from the start of the log for partitions it never held,
	// before then. A member restarted within it (a rolling upgrade, a
	// crash and restart) finds its standbys where they were, and the
	// others spend nothing; one that stays away is replaced after it.
	standbyDelay = time.Minute
	// joinGrace is how long a member started with seeds waits to see
	// another member before it takes partitions over from members it does
	// not see: at its start it sees only itself, for a moment.
	joinGrace = 30 * time.Second
)

// partitions is the node's partition manager. From the members alive (the
// cluster's Ranking) and the partition table in the log (projections/owners)
// it decides, for every delivery partition, whether this node applies its
// records (as its owner, its target, or a standby), whether it serves it
// (runs its endpoint grains and attempts its deliveries), and when it
// takes, hands over or gives up a partition, by appending
// PartitionsAssigned to the table:
//
//   - a partition with no owner yet is served by its target, which records
//     it (START);
//   - a partition whose owner left the cluster is taken by its target once
//     the target has it live (FAILOVER): its first standby, which has
//     applied its records all along, so it catches up its lag, not the
//     history;
//   - a partition whose target is not its owner (a member joined, or came
//     back) moves once the target has it live, its projections are within
//     readyLag of the log's head, and it says so (PartitionsReady):
//     the owner stops starting attempts for it, emits its pending
//     operational events, and records the hand-over (HANDOVER) with the
//     attempts it still runs, which its retiring grains finish; the target
//     serves it from there, and waits for those attempts' outcomes by
//     delivery (ADR 0063). A member that leaves hands over every
//     partition it owns the same way, each once its target says it is
//     ready, or after leaveWait.
//
// It is safe for concurrent use; Owner is on the path of every request to
// an endpoint grain and takes no lock.
type partitions struct {
	log      events.Log
	runner   *projections.Runner
	owners   *owners.Owners
	drain    *endpoint.Drain
	feed     *operational.Feed
	standbys int
	seeds    bool      // the node joins others: it takes nothing over before it has seen one
	started  time.Time // for joinGrace
	logger   *slog.Logger
	now      func() time.Time

	node    atomic.Pointer[cluster.Node]
	claimed atomic.Pointer[events.PartitionSet] // the partitions this node serves, or will once live
	kick    chan struct{}

	mu       sync.Mutex // guards the fields below
	leaving  bool
	leftAt   time.Time                        // when leave began
	joined   bool                             // has seen another member (or has no seeds)
	ready    [events.Partitions + 1]readyMark // a target that said it has the partition live
	pending  [events.Partitions + 1]change    // this node's last change, until the table has it
	draining [events.Partitions + 1]time.Time // since when, for a hand-over; zero when not
	told     map[string]time.Time             // owner → when this node last sent it PartitionsReady
	leavers  map[string]string                // member → its id, for the members that said they are leaving
	seen     map[string]time.Time             // member → when it was last among those alive
	standbyR standbyRanking                   // the ranking standbys are chosen by, cached
	near     nearHead                         // whether the projections are near the log's head
}

// nearHead is the last reading of the projections' lag.
type nearHead struct {
	ok bool
	at time.Time
}

// standbyRanking is a ranking of the members alive and of those that left
// less than standbyDelay ago, and the members it ranks.
type standbyRanking struct {
	members string // sorted, comma-separated
	ranking *cluster.Ranking
}

// change is a change of the table this node appended: until its projection
// of the table reaches it, the node goes by what it appended.
type change struct {
	at   events.Position // zero: none pending
	mine bool            // taken (true) or handed over (false)
}

// readyMark is a PartitionsReady a target sent.
type readyMark struct {
	member string
	at     time.Time
}

func newPartitions(s *Server) *partitions {
	k := max(s.cfg.Standbys, 0) // negative: none
	m := &partitions{
		log: s.log, runner: s.runner, owners: s.owners, drain: &s.drain, feed: s.opsFeed, standbys: k,
		seeds: len(s.cfg.Cluster.Seeds) > 0, started: s.cfg.Now(),
		logger: s.logger, now: s.cfg.Now, kick: make(chan struct{}, 1), told: map[string]time.Time{}, seen: map[string]time.Time{},
		leavers: map[string]string{},
	}
	m.claimed.Store(&events.PartitionSet{})
	return m
}

// Owner implements cluster.PartitionOwners: this node for the partitions
// it claims; else the owner in the table, or the target of a partition
// that never had one; "" for a partition this node owns in the table but
// does not claim (it handed it over, or has not started serving it).
func (m *partitions) Owner(p events.Partition) string {
	n := m.node.Load()
	if n == nil || !p.Valid() {
		return ""
	}
	self := n.Address()
	if m.claimed.Load().Has(p) {
		return self
	}
	owner := m.owners.Owner(p)
	if owner == "" {
		owner = n.Ranking().Target(p)
	}
	if owner == self {
		return ""
	}
	return owner
}

// servedSince returns the position from which this node serves partition
// p: that of the record in the table that gave p to it (a hand-over, a
// takeover, a start), or of the record it appended and the table has not
// applied yet. It reports false when this node does not serve p, or the
// record is not known yet (a start decided, not appended).
func (m *partitions) servedSince(p events.Partition) (events.Position, bool) {
	n := m.node.Load()
	if n == nil || !m.claims(p) {
		return events.Position{}, false
	}
	m.mu.Lock()
	c := m.pending[p]
	m.mu.Unlock()
	if c.mine && !c.at.IsStart() {
		return c.at, true
	}
	o := m.owners.Table().Owners[p]
	if o.Address != n.Address() || o.Since.IsStart() {
		return events.Position{}, false
	}
	return o.Since, true
}

// provisionalFor is how long after this node took a partition over from
// another member its endpoint grains start under a provisional lease while
// they wait for their first one: the grains a move's due work wakes,
// within the seconds a move settles in.
const provisionalFor = 10 * time.Second

// tookOverLately is the endpoint grains' Config.ProvisionalLease: whether
// this node serves p and the table gave it p from another member, by a
// hand-over or a failover, less than provisionalFor ago. The endpoint's
// grain on that member stopped starting attempts when it let p go (or
// died with the member), so a grain here attempting before its tenant's
// grain answers overshoots the tenant's quota by at most its in-flight
// limit, once per move. The record's time is its writer's clock: a
// member whose clock is far off makes the window shorter or longer, not
// the overshoot larger.
func (m *partitions) tookOverLately(p events.Partition) bool {
	n := m.node.Load()
	if n == nil || !m.claims(p) {
		return false
	}
	return tookOver(m.owners.Table().Owners[p], n.Address(), m.now())
}

// tookOver reports whether o, a partition's owner in the table, gave the
// partition to self from another member (a hand-over or a failover) less
// than provisionalFor before now.
func tookOver(o owners.Owner, self string, now time.Time) bool {
	moved := o.Reason == hooklinev1.PartitionsAssigned_REASON_HANDOVER || o.Reason == hooklinev1.PartitionsAssigned_REASON_FAILOVER
	return moved && o.Address == self && o.Previous != "" && o.Previous != self && now.Sub(o.At) < provisionalFor
}

// claims reports whether this node serves partition p (or will once live).
func (m *partitions) claims(p events.Partition) bool {
	set := m.claimed.Load()
	return set != nil && set.Has(p)
}

// wake asks for a step now.
func (m *partitions) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// start gives the manager the cluster member, once started.
func (m *partitions) start(n *cluster.Node) {
	m.node.Store(n)
	m.wake()
}

// receive takes note of another member's PartitionsReady or
// MemberLeaving.
func (m *partitions) receive(msg proto.Message) {
	switch r := msg.(type) {
	case *internalv1.PartitionsReady:
		m.onReady(r)
	case *internalv1.MemberLeaving:
		if r.GetMember() == "" || r.GetId() == "" {
			return
		}
		m.mu.Lock()
		m.leavers[r.GetMember()] = r.GetId()
		m.mu.Unlock()
		m.logger.Info("a member is leaving; it is no partition's target from now", slog.String("member", r.GetMember()))
		m.wake()
	}
}

// onReady takes note of a target's PartitionsReady.
func (m *partitions) onReady(r *internalv1.PartitionsReady) {
	now := m.now()
	m.mu.Lock()
	for _, p := range r.GetPartitions() {
		if part := events.Partition(p); part.Valid() {
			m.ready[part] = readyMark{member: r.GetMember(), at: now}
		}
	}
	m.mu.Unlock()
	m.wake()
}

// Run steps whenever something changed, and every partitionStep, until
// ctx ends.
func (m *partitions) Run(ctx context.Context) error {
	tick := time.NewTicker(partitionStep)
	defer tick.Stop()
	for {
		changed := m.owners.Changed()
		m.step(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.kick:
		case <-changed:
		case <-tick.C:
		}
	}
}

// leave hands every partition this node owns to its next owner, draining
// each first, and returns once the table names another owner for all of
// them, or ctx ends (then the others take them over as from a member that
// died).
func (m *partitions) leave(ctx context.Context) {
	n := m.node.Load()
	if n == nil {
		return
	}
	m.mu.Lock()
	m.leaving, m.leftAt = true, m.now()
	m.mu.Unlock()
	self := n.Address()
	for _, mb := range n.Members() {
		if mb.Address != self {
			n.Send(mb.Address, partitionsService, &internalv1.MemberLeaving{Member: self, Id: n.ID()})
		}
	}
	m.wake()
	for {
		owned := 0
		t := m.owners.Table()
		targets := m.targets(n).Without(self)
		for p := events.Partition(1); p <= events.Partitions; p++ {
			if t.Owners[p].Address == self && targets.Target(p) != "" {
				owned++
			}
		}
		if owned == 0 {
			return
		}
		select {
		case <-ctx.Done():
			m.logger.Warn("stopping before every partition was handed over; the others take the rest over as from a member that died", slog.Int("partitions", owned))
			return
		case <-m.owners.Changed():
		case <-time.After(partitionStep):
		}
	}
}

// plan is what one step decided.
type plan struct {
	follow, claim events.PartitionSet
	take          map[hooklinev1.PartitionsAssigned_Reason]map[string][]events.Partition // by reason, by previous owner
	hand          map[string][]events.Partition                                          // by target
	tell          map[string][]uint32                                                    // by owner
}

// step looks at every partition once, then acts: the partitions to apply
// and serve, the drains, the table's changes, the PartitionsReady to send.
func (m *partitions) step(ctx context.Context) {
	n := m.node.Load()
	if n == nil {
		return
	}
	self := n.Address()
	alive := map[string]bool{}
	for _, a := range n.Ranking().Order(1) {
		alive[a] = true
	}
	ranking := m.targets(n)
	m.mu.Lock()
	standbys := m.standbysBy(alive)
	if m.leaving {
		ranking, standbys = ranking.Without(self), standbys.Without(self)
	}
	if len(alive) > 1 || !m.seeds || m.now().Sub(m.started) > joinGrace {
		m.joined = true
	}
	pl := m.decide(self, ranking, standbys, alive, m.owners.Table(), m.runner.Live())
	m.mu.Unlock()

	// The drain first: a partition gained leaves it before its grains
	// are woken (a grain refused by the drain waits for its next wake),
	// and one handed over is in it already.
	m.drainFor(pl.hand, pl.claim)
	m.runner.Own(pl.follow)
	before := *m.claimed.Load()
	gained := pl.claim.Minus(before)
	if !gained.IsEmpty() {
		m.forget(gained) // before the emitter may see them served
	}
	m.claimed.Store(&pl.claim)
	m.runner.Serve(pl.claim)
	m.logMoved(gained, self)
	if lost := before.Minus(pl.claim); !lost.IsEmpty() {
		n.Rebalance() // their grains stop here; the next request reaches the new owner
	}
	m.record(ctx, self, pl)
	if len(pl.tell) > 0 && m.nearHead(ctx) {
		m.tellReady(n, self, pl.tell)
	}
}

// logMoved logs the partitions this node has just started serving that
// another member recorded giving it (a hand-over), with how long after that
// record they are served here: the new owner's share of a planned move's
// pause, its projections reaching the record (the old owner's share is in
// the record's own line, drained).
func (m *partitions) logMoved(gained events.PartitionSet, self string) {
	t := m.owners.Table()
	now := m.now()
	var moved events.PartitionSet
	var longest time.Duration
	gained.Each(func(p events.Partition) {
		if o := t.Owners[p]; o.Reason == hooklinev1.PartitionsAssigned_REASON_HANDOVER && o.Address == self && !o.At.IsZero() {
			moved.Add(p)
			longest = max(longest, now.Sub(o.At))
		}
	})
	if !moved.IsEmpty() {
		m.logger.Info("serving partitions handed over", slog.String("partitions", moved.String()),
			slog.Duration("after_record", longest.Round(time.Millisecond)))
	}
}

// targets returns the ranking partitions' targets are chosen by: the
// members alive but those that said they are leaving (and are still the
// member that said so, not a restart on the same address). A leaving
// member still owns its partitions, and hands them over: it is alive for
// every other purpose.
func (m *partitions) targets(n *cluster.Node) *cluster.Ranking {
	ranking := n.Ranking()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.leavers) == 0 {
		return ranking
	}
	ids := map[string]string{}
	for _, mb := range n.Members() {
		ids[mb.Address] = mb.ID
	}
	for addr, id := range m.leavers {
		if ids[addr] != id {
			delete(m.leavers, addr) // gone, or started again
			continue
		}
		ranking = ranking.Without(addr)
	}
	return ranking
}

// nearHead reports whether the projections are within readyLag of the
// log's head, reading the lag at most every lagEvery.
func (m *partitions) nearHead(ctx context.Context) bool {
	now := m.now()
	m.mu.Lock()
	near := m.near
	m.mu.Unlock()
	if !near.at.IsZero() && now.Sub(near.at) < lagEvery {
		return near.ok
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	lag, err := m.runner.Lag(lctx)
	cancel()
	// Behind with no age: nothing applied yet since the start.
	near = nearHead{ok: err == nil && (lag.Behind == 0 || (lag.Age > 0 && lag.Age <= readyLag)), at: now}
	m.mu.Lock()
	m.near = near
	m.mu.Unlock()
	return near.ok
}

// standbysBy returns the ranking standbys are chosen by: of the members
// alive and of those that left less than standbyDelay ago; mu is held.
func (m *partitions) standbysBy(alive map[string]bool) *cluster.Ranking {
	now := m.now()
	for a := range alive {
		m.seen[a] = now
	}
	members := make([]string, 0, len(m.seen))
	for a, at := range m.seen {
		if now.Sub(at) > standbyDelay {
			delete(m.seen, a)
			continue
		}
		members = append(members, a)
	}
	slices.Sort(members)
	key := strings.Join(members, ",")
	if m.standbyR.ranking == nil || m.standbyR.members != key {
		m.standbyR = standbyRanking{members: key, ranking: cluster.NewRanking(members)}
	}
	return m.standbyR.ranking
}

// decide computes one step's plan; mu is held. ranking ranks the members
// alive, standbys those the standbys are chosen among.
func (m *partitions) decide(self string, ranking, standbys *cluster.Ranking, alive map[string]bool, t *owners.Table, live events.PartitionSet) plan {
	pl := plan{
		take: map[hooklinev1.PartitionsAssigned_Reason]map[string][]events.Partition{},
		hand: map[string][]events.Partition{}, tell: map[string][]uint32{},
	}
	add := func(r hooklinev1.PartitionsAssigned_Reason, previous string, p events.Partition) {
		if pl.take[r] == nil {
			pl.take[r] = map[string][]events.Partition{}
		}
		pl.take[r][previous] = append(pl.take[r][previous], p)
	}
	now := m.now()
	for p := events.Partition(1); p <= events.Partitions; p++ {
		owner, target := t.Owners[p].Address, ranking.Target(p)
		mine := owner == self
		if c := m.pending[p]; !c.at.IsStart() {
			if t.Owners[p].Since.Less(c.at) {
				mine = c.mine // the table has not caught up with this node's change
			} else {
				m.pending[p] = change{}
			}
		}
		if mine || target == self || slices.Contains(standbys.Standbys(p, m.standbys), self) {
			pl.follow.Add(p)
		}
		handing := false
		switch {
		case mine:
			pl.claim.Add(p)
			if target != "" && target != self && (m.isReady(p, target, now) || m.leaving && now.Sub(m.leftAt) >= leaveWait) {
				handing = true
				pl.hand[target] = append(pl.hand[target], p)
			}
		case owner == self || target != self:
			// Handed over and not in the table yet; or another's.
		case owner == "":
			if m.joined {
				pl.claim.Add(p) // never owned: its target serves it at once
				add(hooklinev1.PartitionsAssigned_REASON_START, "", p)
			}
		case !alive[owner]:
			if live.Has(p) && m.mayTakeOver(t.Owners[p], self, now) {
				add(hooklinev1.PartitionsAssigned_REASON_FAILOVER, owner, p)
			}
		case live.Has(p):
			pl.tell[owner] = append(pl.tell[owner], uint32(p))
		}
		if !handing {
			m.draining[p] = time.Time{}
		}
	}
	return pl
}

// mayTakeOver reports whether this node may take a partition over from an
// owner it does not see: not before it has joined the cluster, nor for a
// while after that owner took the partition from this very node (a split
// brain, seen from both sides).
func (m *partitions) mayTakeOver(o owners.Owner, self string, now time.Time) bool {
	if !m.joined {
		return false
	}
	return !(o.Reason == hooklinev1.PartitionsAssigned_REASON_FAILOVER && o.Previous == self && now.Sub(o.At) < failoverBackoff)
}

// isReady reports whether target said, lately, that it has p live.
func (m *partitions) isReady(p events.Partition, target string, now time.Time) bool {
	r := m.ready[p]
	return r.member == target && now.Sub(r.at) < readyFor
}

// drainFor drains the partitions to hand over, and every partition this
// node does not serve, and looks again soon while a hand-over is under
// way. A partition handed over stays drained: its grains here stop only
// once the placement sees the change, and until then one with deliveries
// already pulled must not start them, which the new owner attempts too.
func (m *partitions) drainFor(hand map[string][]events.Partition, claim events.PartitionSet) {
	s := events.AllPartitions().Minus(claim)
	now := m.now()
	m.mu.Lock()
	for _, ps := range hand {
		for _, p := range ps {
			s.Add(p)
			if m.draining[p].IsZero() {
				m.draining[p] = now
			}
		}
	}
	m.mu.Unlock()
	m.drain.Partitions(s)
	if len(hand) > 0 {
		time.AfterFunc(drainPoll, m.wake)
	}
}

// drained returns, of the partitions to hand to one target, those with no
// operational event left to emit (or whose drain ran out of time), and the
// attempts they still run: the hand-over lists them, and the new owner
// waits for their outcomes, not the hand-over (ADR 0063).
func (m *partitions) drained(ps []events.Partition) (done []events.Partition, running []endpoint.Running) {
	now := m.now()
	for _, p := range ps {
		m.mu.Lock()
		since := m.draining[p]
		m.mu.Unlock()
		if since.IsZero() {
			continue
		}
		pending, err := m.feed.PendingIn(p)
		if err != nil {
			pending = 0 // the next owner emits what is left (a repeat is a duplicate)
		}
		if pending == 0 || now.Sub(since) >= drainTimeout {
			done = append(done, p)
			running = append(running, m.drain.Running(p)...)
		}
	}
	return done, passOn(m.owners.Table(), done, running, now)
}

// record appends the step's changes to the table: takes, then hand-overs
// of drained partitions. A wrong revision means the table changed since
// this node read it (another member, or this node's own change its
// projections have not applied yet): a change goes past those that name
// none of its partitions (assign), and otherwise the next step decides
// again on the table as it is then.
func (m *partitions) record(ctx context.Context, self string, pl plan) {
	t := m.owners.Table()
	expected := t.Expected()
	for _, reason := range []hooklinev1.PartitionsAssigned_Reason{hooklinev1.PartitionsAssigned_REASON_START, hooklinev1.PartitionsAssigned_REASON_FAILOVER} {
		for previous, ps := range pl.take[reason] {
			// A member that died held the attempts its predecessors may
			// still run: its takeover holds them in its place.
			pos, ok := m.assign(ctx, &expected, ps, self, previous, reason, passOn(t, ps, nil, m.now()))
			if !ok {
				return
			}
			m.settle(ps, pos, true)
			m.wake() // serve them now, not when the table has them
		}
	}
	for _, target := range slices.Sorted(maps.Keys(pl.hand)) {
		ps, running := m.drained(pl.hand[target])
		if len(ps) == 0 {
			continue
		}
		drain, word := m.handTimes(ps, target)
		pos, ok := m.assign(ctx, &expected, ps, target, self, hooklinev1.PartitionsAssigned_REASON_HANDOVER, running,
			slog.Duration("drained", drain.Round(time.Millisecond)), slog.Duration("since_ready", word.Round(time.Millisecond)))
		if !ok {
			return
		}
		m.settle(ps, pos, false)
		m.wake() // serve no more: the next step gives them up (their grains retire)
	}
}

// handTimes returns, for partitions about to be handed over, how long the
// longest of their drains has run and how long ago target last said it was
// ready for the earliest of them (it says so every readyEvery; 0 when it
// did not: a leave that ran out of leaveWait): where a hand-over's pause
// went, which the hand-over's log line says.
func (m *partitions) handTimes(ps []events.Partition, target string) (drain, word time.Duration) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		if d := m.draining[p]; !d.IsZero() {
			drain = max(drain, now.Sub(d))
		}
		if r := m.ready[p]; r.member == target && !r.at.IsZero() {
			word = max(word, now.Sub(r.at))
		}
	}
	return drain, word
}

// settle notes this node's change of ps at pos, taken or handed over,
// until its table has it.
func (m *partitions) settle(ps []events.Partition, pos events.Position, mine bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		m.pending[p] = change{at: pos, mine: mine}
		m.draining[p] = time.Time{}
	}
}

// assign appends one PartitionsAssigned with the expected revision, which
// it advances; it reports whether the append landed, and its position.
// running are the attempts a hand-over leaves running.
func (m *partitions) assign(ctx context.Context, expected *events.ExpectedRevision, ps []events.Partition, owner, previous string, reason hooklinev1.PartitionsAssigned_Reason, running []endpoint.Running, logged ...any) (events.Position, bool) {
	slices.Sort(ps)
	ev := &hooklinev1.PartitionsAssigned{Owner: owner, Previous: previous, Reason: reason, At: timestamppb.New(m.now())}
	for _, p := range ps {
		ev.Partitions = append(ev.Partitions, uint32(p))
	}
	for _, r := range running {
		ev.Running = append(ev.Running, &hooklinev1.RunningAttempt{
			EndpointId: r.EndpointID, DeliveryId: r.DeliveryID, Attempt: r.Attempt, Until: timestamppb.New(r.Until),
		})
	}
	sum := sha256.Sum256(fmt.Append(nil, ev.GetPartitions(), owner, previous, reason))
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var res events.AppendResult
	var err error
	for try := 0; ; try++ {
		e, eerr := events.Encode(ev, fmt.Sprintf("partitions/%v/%s", *expected, hex.EncodeToString(sum[:8])), events.OwnersStream)
		if eerr != nil {
			m.logger.Error("cannot encode a change of the partition table", slog.Any("error", eerr))
			return events.Position{}, false
		}
		res, err = m.log.Append(actx, events.OwnersStream, *expected, e)
		if !errors.Is(err, events.ErrWrongRevision) || try == maxUnrelated {
			break
		}
		next, ok := m.unrelated(actx, *expected, ps)
		if !ok {
			break
		}
		*expected = next
	}
	switch {
	case errors.Is(err, events.ErrWrongRevision):
		m.logger.Debug("the partition table changed meanwhile; deciding again", slog.Any("error", err))
		if head, herr := m.log.Head(actx); herr == nil {
			_ = m.runner.WaitFor(actx, head)
		}
		return events.Position{}, false
	case err != nil:
		m.logger.Warn("cannot record a change of the partition table; trying again", slog.String("reason", reason.String()), slog.Any("error", err))
		return events.Position{}, false
	}
	*expected = events.ExpectAfter(res.Revision, true)
	m.logger.Info("partitions assigned", append([]any{slog.String("owner", owner), slog.String("previous", previous),
		slog.String("reason", reason.String()), slog.Int("partitions", len(ps)), slog.Int("running", len(running))}, logged...)...)
	return res.Position, true
}

// maxUnrelated is how many changes of the table by other members, none
// naming a partition of its own, one append of a change goes past
// (unrelated) before it decides again on the table as its projections
// have it.
const maxUnrelated = 3

// unrelated reads the changes of the table appended after expected (by
// another member, or by this node and not applied by its projections
// yet), and reports whether none of them names a
// partition of ps; then the change of ps this node decided on the table
// before them still holds, and it appends it after them, at the revision
// it returns. Two members that hand partitions over to one that came back,
// or take over the partitions of one that died, each at the same moment,
// would otherwise take turns failing: each failure waits for the
// projections to reach the log's head (a quarter of a second under load)
// while the partitions it hands over wait, drained.
func (m *partitions) unrelated(ctx context.Context, expected events.ExpectedRevision, ps []events.Partition) (events.ExpectedRevision, bool) {
	var from events.Revision
	switch e := expected.(type) {
	case events.Exact:
		from = events.Revision(e) + 1
	case events.NoStream:
	default:
		return nil, false
	}
	const most = 16
	recs, err := m.log.ReadStream(ctx, events.OwnersStream, events.Forwards, from, most)
	if err != nil || len(recs) == 0 || len(recs) == most {
		return nil, false
	}
	for i := range recs {
		msg, err := events.Decode(&recs[i])
		if err != nil {
			return nil, false
		}
		a, ok := msg.(*hooklinev1.PartitionsAssigned)
		if !ok {
			return nil, false
		}
		for _, p := range a.GetPartitions() {
			if slices.Contains(ps, events.Partition(p)) {
				return nil, false
			}
		}
	}
	return events.ExpectAfter(recs[len(recs)-1].Revision, true), true
}

// forget drops, for the partitions this node starts serving, the
// operational entries their previous owner emitted (before a hand-over's
// position) or that are older than failoverKeep (after a failover): a
// standby keeps a day of them, which must not be emitted again.
func (m *partitions) forget(gained events.PartitionSet) {
	t := m.owners.Table()
	olderThan := m.now().Add(-failoverKeep)
	gained.Each(func(p events.Partition) {
		if p == events.NoPartition {
			return
		}
		var before events.Position
		if o := t.Owners[p]; o.Reason == hooklinev1.PartitionsAssigned_REASON_HANDOVER {
			before = o.Since
		}
		if _, err := m.feed.Forget(p, before, olderThan); err != nil {
			m.logger.Warn("cannot drop the operational entries another member emitted; some may be emitted again", slog.Int("partition", int(p)), slog.Any("error", err))
		}
	})
}

// tellReady tells each owner the partitions this node is the target of and
// has live, at most every readyEvery.
func (m *partitions) tellReady(n *cluster.Node, self string, tell map[string][]uint32) {
	now := m.now()
	for owner, ps := range tell {
		m.mu.Lock()
		due := now.Sub(m.told[owner]) >= readyEvery
		if due {
			m.told[owner] = now
		}
		m.mu.Unlock()
		if due {
			n.Send(owner, partitionsService, &internalv1.PartitionsReady{Member: self, Partitions: ps})
		}
	}
}
