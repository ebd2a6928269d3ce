package memberlist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	hml "github.com/hashicorp/memberlist"
)

// ErrStarted is returned when a Provider is started a second time; a
// provider serves one cluster member for its whole life.
var ErrStarted = errors.New("memberlist: provider already started")

// eventBuffer is the capacity of the channel memberlist's event delegate
// writes to. The drain goroutine empties it continuously; the buffer only
// absorbs the burst of joins a push/pull sync produces and any event
// memberlist emits while it shuts down, after the drain goroutine ended.
const eventBuffer = 256

var _ pcluster.ClusterProvider = (*Provider)(nil)

// Provider is a protoactor cluster.ClusterProvider on hashicorp/memberlist:
// gossip decides who is alive, and every change hands the full live member
// set to protoactor's MemberList. Create it with [New], give it to
// protoactor's cluster configuration, and let protoactor call StartMember
// (or StartClient) and Shutdown. A Provider serves one start and one
// shutdown; its methods are safe for concurrent use. The zero value is not
// usable.
type Provider struct {
	cfg Config

	// kick asks the publish goroutine to read the member list and hand it
	// to protoactor. Capacity one: kicks coalesce while a publish runs.
	kick    chan struct{}
	events  chan hml.NodeEvent
	leaving atomic.Bool // set first thing in Shutdown: stop publishing

	loops     sync.WaitGroup // drain and publish goroutines
	joining   sync.WaitGroup // the background rejoin goroutine, if any
	stopLoops context.CancelFunc
	stopJoin  context.CancelFunc

	// meta is this node's metadata as gossiped now (delegate.NodeMeta).
	meta atomic.Pointer[[]byte]
	// nodes is the live nodes as the event delegate copied them.
	nodes *view

	mu       sync.Mutex // guards the fields below
	ml       *hml.Memberlist
	self     meta // this node's metadata, once started
	ready    bool // Ready was called
	cluster  *pcluster.Cluster
	members  []*pcluster.Member // last set handed to protoactor
	shutdown bool
	// refused marks the members taken for dead because their ports refuse
	// connections, and checking those being checked (see refused.go).
	refused  map[string]bool
	checking map[string]bool
}

// New returns a provider for cfg, or the error of cfg.Validate.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Provider{
		cfg:    cfg.withDefaults(),
		kick:   make(chan struct{}, 1),
		events: make(chan hml.NodeEvent, eventBuffer),
	}, nil
}

// StartMember joins the gossip cluster as a member hosting c's kinds. The
// actor system's remote must already listen: its address is what the other
// members will send to. protoactor calls this from Cluster.StartMember.
func (p *Provider) StartMember(c *pcluster.Cluster) error {
	kinds := c.GetClusterKinds()
	slices.Sort(kinds)
	return p.start(c, kinds, false)
}

// StartClient joins the gossip cluster to learn the members without hosting
// grains: other nodes leave it out of their member sets. protoactor calls
// this from Cluster.StartClient.
func (p *Provider) StartClient(c *pcluster.Cluster) error {
	return p.start(c, nil, true)
}

func (p *Provider) start(c *pcluster.Cluster, kinds []string, client bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ml != nil || p.shutdown {
		return ErrStarted
	}
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil || port <= 0 {
		return fmt.Errorf("memberlist: actor system address %q is not host:port: start remote before the provider", c.ActorSystem.Address())
	}
	self := meta{
		Cluster:  p.cfg.ClusterName,
		ID:       c.ActorSystem.ID,
		Host:     host,
		Port:     port,
		Kinds:    kinds,
		Client:   client,
		Starting: p.cfg.Starting && !p.ready,
	}
	md, err := self.encode()
	if err != nil {
		return fmt.Errorf("memberlist: %w", err)
	}
	p.self = self
	p.meta.Store(&md)

	mc, err := p.cfg.memberlistConfig(c.ActorSystem.ID)
	if err != nil {
		return err
	}
	mc.Delegate = delegate{meta: &p.meta}
	// The channel delegate, not a synchronous one: memberlist calls the
	// event delegate while holding its node lock, so reading Members() from
	// the callback would deadlock.
	p.nodes = newView(&hml.ChannelEventDelegate{Ch: p.events})
	mc.Events = p.nodes
	ml, err := hml.Create(mc)
	if err != nil {
		return fmt.Errorf("memberlist: create on %s: %w", joinHostPort(p.cfg.Host, p.cfg.Port), err)
	}
	p.ml, p.cluster = ml, c

	loopCtx, stopLoops := context.WithCancel(context.Background())
	p.stopLoops = stopLoops
	p.refused, p.checking = map[string]bool{}, map[string]bool{}
	p.loops.Add(3)
	go p.drain(loopCtx)
	go p.publish(loopCtx, c)
	go p.watchRefused(loopCtx, ml, c.ActorSystem.EventStream)
	p.signal()

	log := p.cfg.Logger.With(slog.String("member_id", c.ActorSystem.ID), slog.String("gossip_address", ml.LocalNode().Address()))
	if len(p.cfg.Seeds) == 0 {
		log.Info("memberlist started a new cluster")
		p.stopJoin = func() {}
		return nil
	}
	n, err := ml.Join(p.cfg.Seeds)
	if err == nil {
		log.Info("memberlist joined the cluster", slog.Int("seeds_contacted", n))
		p.stopJoin = func() {}
		return nil
	}
	log.Warn("memberlist could not reach any seed, retrying in the background", slog.Any("seeds", p.cfg.Seeds), slog.Any("error", err))
	joinCtx, stopJoin := context.WithCancel(context.Background())
	p.stopJoin = stopJoin
	p.joining.Add(1)
	go p.rejoin(joinCtx, ml, log)
	return nil
}

// Shutdown leaves the gossip cluster and stops memberlist. Graceful means
// the leave is gossiped first (bounded by Timing.LeaveTimeout), so the
// other members drop this node at once instead of after failure detection.
// A leave that is not acknowledged in time is logged; Shutdown returns only
// the error of stopping memberlist. Calling it again, or before a start,
// does nothing.
func (p *Provider) Shutdown(graceful bool) error {
	p.mu.Lock()
	ml := p.ml
	if ml == nil || p.shutdown {
		p.shutdown = true
		p.mu.Unlock()
		return nil
	}
	p.shutdown = true
	p.mu.Unlock()

	// Stop handing topologies to protoactor: from here on this node's view
	// (which soon excludes itself) must not re-place grains.
	p.leaving.Store(true)
	p.stopJoin()
	p.joining.Wait()

	if graceful {
		if err := ml.Leave(p.cfg.Timing.LeaveTimeout); err != nil {
			p.cfg.Logger.Warn("memberlist leave was not acknowledged", slog.Any("error", err))
		}
	}
	err := ml.Shutdown()
	// The drain goroutine ran until now so that memberlist never blocked on
	// a full event channel during Leave and Shutdown.
	p.stopLoops()
	p.loops.Wait()
	if err != nil {
		return fmt.Errorf("memberlist: shutdown: %w", err)
	}
	return nil
}

// Ready ends a start as starting (Config.Starting): the node's metadata
// no longer says so, and the change is gossiped (memberlist's update,
// bounded by Timing.LeaveTimeout). Called before the provider started,
// the node starts ready. Later calls do nothing.
func (p *Provider) Ready() error {
	p.mu.Lock()
	if p.ready {
		p.mu.Unlock()
		return nil
	}
	p.ready = true
	ml := p.ml
	if ml == nil || p.shutdown || !p.self.Starting {
		p.mu.Unlock()
		return nil
	}
	p.self.Starting = false
	md, err := p.self.encode()
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("memberlist: %w", err)
	}
	p.meta.Store(&md)
	p.mu.Unlock()
	if err := ml.UpdateNode(p.cfg.Timing.LeaveTimeout); err != nil {
		return fmt.Errorf("memberlist: gossip that the node is ready: %w", err)
	}
	p.signal() // this node's own view
	return nil
}

// Addr returns the gossip address (host:port) this node advertises, which
// other nodes use as a seed; empty before a start. With [AnyPort] it is how
// to learn the port chosen.
func (p *Provider) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ml == nil {
		return ""
	}
	return p.ml.LocalNode().Address()
}

// Members returns a copy of the member set last handed to protoactor's
// MemberList, sorted by member id. protoactor had fully applied that set
// (placement included) before it became visible here.
func (p *Provider) Members() []*pcluster.Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*pcluster.Member, len(p.members))
	for i, m := range p.members {
		out[i] = &pcluster.Member{Id: m.Id, Host: m.Host, Port: m.Port, Kinds: slices.Clone(m.Kinds)}
	}
	return out
}

// signal asks the publish goroutine for a new topology without blocking.
func (p *Provider) signal() {
	select {
	case p.kick <- struct{}{}:
	default: // a publish is already pending and will read the latest list
	}
}

// drain empties memberlist's event channel, logs each change and signals
// the publish goroutine. It never waits on anything but the channel, so
// memberlist, which sends while holding its node lock, is never held up.
func (p *Provider) drain(ctx context.Context) {
	defer p.loops.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-p.events:
			p.logEvent(ev)
			p.signal()
		}
	}
}

// publish hands the full live member set to protoactor on every signal.
// It reads the view here, in its own goroutine, never in memberlist's
// callbacks; and it is the only caller of UpdateClusterTopology, so
// topologies reach protoactor in the order they were read.
func (p *Provider) publish(ctx context.Context, c *pcluster.Cluster) {
	defer p.loops.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		if p.leaving.Load() {
			continue
		}
		members := p.liveMembers()
		c.MemberList.UpdateClusterTopology(members)
		p.mu.Lock()
		p.members = members
		p.mu.Unlock()
		if p.cfg.OnMembers != nil {
			p.cfg.OnMembers(members)
		}
	}
}

// liveMembers converts memberlist's live nodes into protoactor members,
// skipping clients, nodes of another cluster, nodes whose metadata cannot
// be read and nodes whose ports refuse connections (refused.go).
func (p *Provider) liveMembers() []*pcluster.Member {
	nodes := p.nodes.live()
	members := make([]*pcluster.Member, 0, len(nodes))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range nodes {
		if p.refused[n.Name] {
			continue
		}
		m, err := decodeMeta(n.Meta)
		if err != nil {
			p.cfg.Logger.Debug("memberlist node ignored", slog.String("node", n.Name), slog.Any("error", err))
			continue
		}
		if m.Client || m.Cluster != p.cfg.ClusterName {
			continue
		}
		members = append(members, m.member())
	}
	slices.SortFunc(members, func(a, b *pcluster.Member) int { return strings.Compare(a.Id, b.Id) })
	return members
}

func (p *Provider) logEvent(ev hml.NodeEvent) {
	var msg string
	switch ev.Event {
	case hml.NodeJoin:
		msg = "memberlist node joined"
	case hml.NodeLeave:
		msg = "memberlist node left"
	default:
		msg = "memberlist node updated"
	}
	p.cfg.Logger.Info(msg, slog.String("member_id", ev.Node.Name), slog.String("gossip_address", ev.Node.Address()))
}

// rejoin retries the seeds until one answers or ctx ends.
func (p *Provider) rejoin(ctx context.Context, ml *hml.Memberlist, log *slog.Logger) {
	defer p.joining.Done()
	t := time.NewTicker(p.cfg.Timing.JoinRetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := ml.Join(p.cfg.Seeds)
		if err != nil {
			log.Debug("memberlist join retry failed", slog.Any("error", err))
			continue
		}
		log.Info("memberlist joined the cluster", slog.Int("seeds_contacted", n))
		return
	}
}

// delegate gives memberlist this node's metadata; gossip carries nothing
// else, so the message hooks are empty.
type delegate struct{ meta *atomic.Pointer[[]byte] }

func (d delegate) NodeMeta(limit int) []byte                  { return *d.meta.Load() }
func (d delegate) NotifyMsg([]byte)                           {}
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d delegate) LocalState(join bool) []byte                { return nil }
func (d delegate) MergeRemoteState(buf []byte, join bool)     {}
