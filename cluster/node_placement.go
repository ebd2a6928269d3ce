package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/hookline/hookline/cluster/memberlist"
	"github.com/hookline/hookline/events"
)

// placementActorName names each member's placement actor; the lookup of
// one member asks the placement actor of the grain's owner by this name.
const placementActorName = "hookline-placement"

// lookup is the node's identity lookup: protoactor's disthash, rewritten
// with three fixes and placement by partition. Each grain identity is owned
// by the member that rendezvous hashing of (kind, identity) over the
// members hosting the kind picks, except the grains of the partitioned kind
// (endpoints), owned by the owner of their delivery partition
// (Config.Owners, or the partition's target in the Ranking), so that they
// run where their due work is; the owner's
// placement actor activates the grain on first request and stops it when a
// topology change gives the identity to another member, so the next
// request re-activates it there.
//
// The fixes: disthash swaps its rendezvous table without synchronisation
// while requests read it (a data race on every topology change), here it
// is an atomic pointer; its activation request waits a fixed five seconds,
// here the node's RequestTimeout; its placement actor dereferences nil when
// a terminated grain is not found (comparing PIDs by pointer), which would
// crash it and lose every activation it tracks, here PIDs compare by value.
//
// It is safe for concurrent use once Setup has run; protoactor calls Setup
// from Cluster.StartMember and Shutdown (twice) from Cluster.Shutdown.
type lookup struct {
	activationTimeout time.Duration
	// partitioned is the kind whose grains are placed by delivery
	// partition; "" for none. owners, when set, names each partition's
	// owner; else the partition's target in the ranking owns it.
	// onTopology, when set, is told each new ranking, from protoactor's
	// event stream: it must not block.
	partitioned string
	owners      PartitionOwners
	onTopology  func(*Ranking)

	cluster   *pcluster.Cluster
	rdv       atomic.Pointer[pcluster.Rendezvous]
	readyKey  atomic.Pointer[string] // the ids of the members rdv places on, for onMembers
	ranking   atomic.Pointer[Ranking]
	placement *actor.PID
	sub       *eventstream.Subscription
	stopOnce  sync.Once

	mu      sync.Mutex
	refused map[string]time.Time // owners outside the membership that refused, and when
}

var _ pcluster.IdentityLookup = (*lookup)(nil)

// Setup starts the placement actor and follows topology changes.
func (l *lookup) Setup(c *pcluster.Cluster, _ []string, _ bool) {
	l.cluster = c
	l.refused = map[string]time.Time{}
	l.rdv.Store(pcluster.NewRendezvous())
	l.ranking.Store(&Ranking{})
	props := actor.PropsFromProducer(func() actor.Actor {
		return &placement{cluster: c, lookup: l, grains: map[string]grain{}}
	})
	pid, err := c.ActorSystem.Root.SpawnNamed(props, placementActorName)
	if err != nil {
		// protoactor's Setup cannot return an error; StartMember turns
		// this panic into Start's error.
		panic(err)
	}
	l.placement = pid
	l.sub = c.ActorSystem.EventStream.Subscribe(func(ev any) {
		t, ok := ev.(*pcluster.ClusterTopology)
		if !ok {
			return
		}
		rdv := pcluster.NewRendezvous()
		rdv.UpdateMembers(readyMembers(t.Members))
		l.rdv.Store(rdv)
		ranking := NewRanking(hosting(t.Members, l.partitioned))
		l.ranking.Store(ranking)
		c.ActorSystem.Root.Send(l.placement, rebalance{})
		if l.onTopology != nil {
			l.onTopology(ranking)
		}
	})
}

// onMembers is the provider's Config.OnMembers: every member set, also
// one in which only a member's readiness changed, which protoactor's
// topology events leave out. When the members grains are placed on by
// identity changed, it places them anew.
func (l *lookup) onMembers(ms []*pcluster.Member) {
	if l.placement == nil {
		return // before Setup
	}
	ready := readyMembers(ms)
	key := make([]string, len(ready))
	for i, m := range ready {
		key[i] = m.Id
	}
	slices.Sort(key)
	k := strings.Join(key, ",")
	if old := l.readyKey.Swap(&k); old != nil && *old == k {
		return
	}
	rdv := pcluster.NewRendezvous()
	rdv.UpdateMembers(ready)
	l.rdv.Store(rdv)
	l.cluster.ActorSystem.Root.Send(l.placement, rebalance{})
}

// readyMembers returns the members that are not starting
// (memberlist.StartingKind), or all of them when every one is: the grains
// placed by rendezvous hashing go to a member that is ready while there is
// one, and a cluster that starts whole is not left with none.
func readyMembers(ms []*pcluster.Member) []*pcluster.Member {
	ready := slices.DeleteFunc(slices.Clone(ms), func(m *pcluster.Member) bool { return m.HasKind(memberlist.StartingKind) })
	if len(ready) == 0 {
		return ms
	}
	return ready
}

// hosting returns the addresses of the members that host kind.
func hosting(ms []*pcluster.Member, kind string) []string {
	var out []string
	for _, m := range ms {
		if m.HasKind(kind) {
			out = append(out, m.Address())
		}
	}
	return out
}

// partitionOwner returns the address of the member that owns partition p:
// the owners' answer when set, else p's target.
func (l *lookup) partitionOwner(p events.Partition) string {
	if l.owners != nil {
		return l.owners.Owner(p)
	}
	return l.ranking.Load().Target(p)
}

// ownerOf returns the address of the member that owns the grain: by its
// partition for the partitioned kind, by rendezvous hashing of its
// identity for the others.
func (l *lookup) ownerOf(ci *pcluster.ClusterIdentity) string {
	if l.partitioned != "" && ci.Kind == l.partitioned {
		return l.partitionOwner(events.PartitionOf(ci.Identity))
	}
	return l.rdv.Load().GetByClusterIdentity(ci)
}

// refusedFor is how long a partition owner outside the membership whose
// port refused a connection is taken for gone without dialling it again.
const refusedFor = time.Second

// reachable reports whether an activation request may be sent to addr:
// this node, a member hosting the partitioned kind, or a process outside
// the membership that the partition table names and that still listens (a
// split brain: another group of members on the same log, whose owner can
// still answer for its partitions). A dead process the table still names
// (until a failover is recorded) refuses its port: it gets no request,
// which protoactor's remote would otherwise open a connection for while it
// may be shutting down.
func (l *lookup) reachable(addr string) bool {
	if addr == l.cluster.ActorSystem.Address() || slices.Contains(l.ranking.Load().Order(1), addr) {
		return true
	}
	l.mu.Lock()
	at, ok := l.refused[addr]
	l.mu.Unlock()
	if ok && time.Since(at) < refusedFor {
		return false
	}
	if !memberlist.Refuses(context.Background(), addr) {
		return true
	}
	l.mu.Lock()
	if len(l.refused) >= 64 { // forget old marks: a dial costs little
		clear(l.refused)
	}
	l.refused[addr] = time.Now()
	l.mu.Unlock()
	return false
}

// Get returns the PID of the grain, activating it on its owner, or nil if
// no member hosts the kind or the owner did not answer in time.
func (l *lookup) Get(ci *pcluster.ClusterIdentity) *actor.PID {
	owner := l.ownerOf(ci)
	if owner == "" || (ci.Kind == l.partitioned && !l.reachable(owner)) {
		// No owner, or a partition owner that is gone (the table may still
		// name a member that died): the caller retries once the table
		// moves on.
		return nil
	}
	req := &pcluster.ActivationRequest{ClusterIdentity: ci}
	res, err := l.cluster.ActorSystem.Root.
		RequestFuture(actor.NewPID(owner, placementActorName), req, l.activationTimeout).Result()
	if err != nil {
		return nil
	}
	resp, ok := res.(*pcluster.ActivationResponse)
	if !ok || resp.Failed {
		return nil
	}
	return resp.Pid
}

// RemovePid does nothing: protoactor never calls it, and the event
// disthash broadcasts from it has no subscriber.
func (l *lookup) RemovePid(*pcluster.ClusterIdentity, *actor.PID) {}

// Shutdown stops following topology changes and stops the placement actor,
// which stops this member's grains first. Later calls do nothing.
func (l *lookup) Shutdown() {
	l.stopOnce.Do(func() {
		system := l.cluster.ActorSystem
		system.EventStream.Unsubscribe(l.sub)
		if err := system.Root.PoisonFuture(l.placement).Wait(); err != nil {
			l.cluster.Logger().Error("placement actor did not stop", slog.Any("error", err))
		}
	})
}

// grain is one activation a placement actor tracks.
type grain struct {
	id  *pcluster.ClusterIdentity
	pid *actor.PID
}

// rebalance asks the placement actor to stop the grains this member no
// longer owns.
type rebalance struct{}

// Retire is what the placement sends a grain of the partitioned kind whose
// partition another member owns now, instead of stopping it: the grain
// answers nothing new, finishes the work it cannot hand over (the endpoint
// grain: the attempts it has running, until their outcomes are recorded),
// and then stops itself. The placement routes nothing to it meanwhile,
// and activates no other grain of its identity on this member until it
// has stopped; one that has not stopped within retireWithin is stopped.
type Retire struct{}

// retireWithin bounds a retiring grain's life: longer than any attempt
// (30 s at most) and the append of its outcome.
const retireWithin = time.Minute

// retireDue is the placement's timer for a retiring grain.
type retireDue struct{ pid *actor.PID }

// placement activates the grains this member owns, as its children, and
// stops those that a topology change, or a change of a partition's owner,
// gives to another member (it retires those of the partitioned kind). It
// activates no grain of a partition this member does not own: the
// caller's next attempt asks the lookup again.
type placement struct {
	cluster  *pcluster.Cluster
	lookup   *lookup
	grains   map[string]grain // by ClusterIdentity.AsKey()
	retiring map[string]grain // retired grains not stopped yet, by ClusterIdentity.AsKey()
	stopping bool
}

func (p *placement) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pcluster.ActivationRequest:
		p.activate(ctx, msg.ClusterIdentity)
	case rebalance:
		p.rebalance(ctx)
	case retireDue:
		for _, g := range p.retiring {
			if g.pid.Equal(msg.pid) {
				ctx.Poison(g.pid) // still running: stopped, its attempts cut
			}
		}
	case *actor.Terminated:
		p.terminated(ctx, msg.Who)
	case *actor.Stopping:
		// Stop every grain before this actor, waiting for each, as
		// disthash does: a grain's Stopped handler still runs on this
		// member.
		p.stopping = true
		futures := make([]*actor.Future, 0, len(p.grains)+len(p.retiring))
		for _, g := range p.grains {
			futures = append(futures, ctx.PoisonFuture(g.pid))
		}
		for _, g := range p.retiring {
			futures = append(futures, ctx.PoisonFuture(g.pid))
		}
		for _, f := range futures {
			_ = f.Wait()
		}
	}
}

func (p *placement) activate(ctx actor.Context, ci *pcluster.ClusterIdentity) {
	if g, ok := p.grains[ci.AsKey()]; ok {
		ctx.Respond(&pcluster.ActivationResponse{Pid: g.pid})
		return
	}
	if _, ok := p.retiring[ci.AsKey()]; ok {
		// Its last activation here still finishes what it cannot hand
		// over: the caller asks again.
		ctx.Respond(&pcluster.ActivationResponse{Failed: true})
		return
	}
	kind, ok := p.cluster.TryGetClusterKind(ci.Kind)
	if !ok || p.lookup.ownerOf(ci) != p.cluster.ActorSystem.Address() {
		// Not a kind of this member, or not its grain (any more, or not
		// yet: a caller whose view of the owners lags): the caller asks
		// again and reaches the owner.
		ctx.Respond(&pcluster.ActivationResponse{Failed: true})
		return
	}
	ctx.Respond(&pcluster.ActivationResponse{Pid: p.spawn(ctx, kind, ci)})
}

// spawn starts the grain of ci, a kind of this member.
func (p *placement) spawn(ctx actor.Context, kind *pcluster.ActivatedKind, ci *pcluster.ClusterIdentity) *actor.PID {
	pid := ctx.SpawnPrefix(pcluster.WithClusterIdentity(kind.Props, ci), ci.Identity)
	kind.Inc()
	p.grains[ci.AsKey()] = grain{id: ci, pid: pid}
	return pid
}

// rebalance stops the grains that another member owns now, and retires
// those of the partitioned kind; their next request activates them there.
func (p *placement) rebalance(ctx actor.Context) {
	me := p.cluster.ActorSystem.Address()
	for key, g := range p.grains {
		if p.lookup.ownerOf(g.id) == me {
			continue
		}
		if p.lookup.partitioned == "" || g.id.Kind != p.lookup.partitioned {
			ctx.Poison(g.pid)
			continue
		}
		delete(p.grains, key)
		if p.retiring == nil {
			p.retiring = map[string]grain{}
		}
		p.retiring[key] = g
		ctx.Send(g.pid, Retire{})
		scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(retireWithin, ctx.Self(), retireDue{pid: g.pid})
	}
}

// terminated forgets a grain that stopped. A retired grain whose partition
// came back to this member meanwhile (its activations were refused) is
// started again at once, so that it pulls its due work without waiting
// for the next wake.
func (p *placement) terminated(ctx actor.Context, who *actor.PID) {
	for _, retired := range []bool{false, true} {
		m := p.grains
		if retired {
			m = p.retiring
		}
		for key, g := range m {
			if !g.pid.Equal(who) {
				continue
			}
			kind, ok := p.cluster.TryGetClusterKind(g.id.Kind)
			if ok {
				kind.Dec()
			}
			delete(m, key)
			if ok && retired && !p.stopping && p.lookup.ownerOf(g.id) == p.cluster.ActorSystem.Address() {
				p.spawn(ctx, kind, g.id)
			}
			return
		}
	}
}
