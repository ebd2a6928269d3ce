package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/cluster/memberlist"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/pause"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// Sentinel errors of [Node.Request] and [Node.Stop].
var (
	// ErrStopped is returned by Request once Stop has begun.
	ErrStopped = errors.New("cluster: node stopped")
	// ErrUnavailable is returned by Request when every attempt failed:
	// no member hosts the kind, the owner did not answer in time, or the
	// member set was changing. It wraps the last attempt's error.
	ErrUnavailable = errors.New("cluster: grain unavailable")
)

const (
	// requestAttempts bounds Request. The first attempt after a member
	// died can go to the dead member (its grains' PIDs are still cached,
	// or failure detection has not removed it yet) and time out; the
	// retry asks the identity lookup again and reaches the new owner.
	// Only what is safe to repeat is repeated (see Request).
	requestAttempts = 3
	// retryPause is the pause before the second attempt, doubled before
	// the third: enough for a topology change in flight to land.
	retryPause = 100 * time.Millisecond
	// remoteRetries is how many times protoactor's remote dials a member
	// before declaring the endpoint dead. Its default (5, two seconds
	// apart) holds a writer for ten seconds after a member is gone and
	// slows shutdown; membership, not redialling, decides who is alive.
	remoteRetries = 1
	// protoactorGossipInterval is the period of protoactor's own gossip
	// loop, which Hookline leaves idle; see Start.
	protoactorGossipInterval = 24 * time.Hour
	// runStopTimeout bounds the graceful stop Run performs.
	runStopTimeout = 30 * time.Second
)

// Member is one member of the cluster as this node sees it.
type Member struct {
	ID      string   // protoactor member (actor system) id
	Address string   // protoactor remote address, host:port
	Kinds   []string // grain kinds it hosts, sorted
}

// Node is one Hookline process in the cluster: a protoactor actor system
// with remote and cluster, membership from memberlist, and grains placed
// by a distributed hash of their identity. Create it with [Start]; it is
// safe for concurrent use; the zero value is not usable.
type Node struct {
	cfg      Config
	log      *slog.Logger
	system   *actor.ActorSystem
	cluster  *pcluster.Cluster
	provider *memberlist.Provider
	lookup   *lookup // the placement of grains and partitions

	// attempts counts Request attempts in flight. An attempt runs in its
	// own goroutine because protoactor's request cannot be cancelled;
	// each ends within its timeout, and Stop waits for all of them.
	attempts sync.WaitGroup

	mu       sync.Mutex // guards stopping and attempts.Add against Stop
	stopping bool

	stopOnce sync.Once
	stopped  chan struct{} // closed when the shutdown has finished
	stopErr  error         // written before stopped is closed
}

// Start starts a node: protoactor's remote listens on cfg.Host:cfg.Port,
// memberlist gossips on cfg.GossipHost:cfg.GossipPort and joins cfg.Seeds,
// and the node becomes a member hosting cfg.Kinds. It returns once the
// node is a member; protoactor spends about a second of that in a fixed
// pause. A node with no seeds is a cluster of one.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	gossip := cfg.gossipConfig()
	var remoteOpts []remote.ConfigOption
	var creds *memberCredentials
	if len(cfg.Secrets) > 0 {
		var err error
		if creds, err = newCredentials(cfg.Secrets, time.Now()); err != nil {
			return nil, fmt.Errorf("start node: %w", err)
		}
		gossip.Keys = creds.gossipKeys
		remoteOpts = append(remoteOpts,
			remote.WithServerOptions(grpc.Creds(grpccreds.NewTLS(creds.server))),
			remote.WithDialOptions(grpc.WithTransportCredentials(grpccreds.NewTLS(creds.client))))
	}
	lk := &lookup{activationTimeout: cfg.RequestTimeout, partitioned: cfg.PartitionedKind, owners: cfg.Owners, onTopology: cfg.OnTopology}
	gossip.OnMembers = lk.onMembers
	provider, err := memberlist.New(gossip)
	if err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}

	system := actor.NewActorSystem(actor.WithLoggerFactory(func(s *actor.ActorSystem) *slog.Logger {
		// protoactor logs every activation and topology change at info
		// level; only its warnings and errors are worth an operator's eye.
		return slog.New(minLevel{Handler: cfg.Logger.Handler(), min: slog.LevelWarn}).
			With(slog.String("component", "protoactor"), slog.String("member_id", s.ID))
	}))
	rc := remote.Configure(cfg.Host, cfg.remotePort(), remoteOpts...)
	rc.MaxRetryCount = remoteRetries
	cc := pcluster.Configure(cfg.Name, provider, lk, rc,
		pcluster.WithKinds(cfg.Kinds...),
		pcluster.WithRequestTimeout(cfg.RequestTimeout),
	)
	// Liveness has one source, memberlist. protoactor's own gossip loop
	// would block a member whose heartbeat it missed for 20 s, for good,
	// even while memberlist sees it alive; and it reads the remote's block
	// list without the lock that UpdateClusterTopology writes it under (a
	// data race each time a member leaves). Nothing Hookline uses needs it
	// (disthash places grains from the member list alone), so it ticks once
	// a day and never expires a heartbeat.
	cc.GossipInterval = protoactorGossipInterval
	cc.HeartbeatExpiration = time.Duration(math.MaxInt64)
	c := pcluster.New(system, cc)
	if err := startMember(c); err != nil {
		abandon(c, provider)
		return nil, fmt.Errorf("start node on %s: %w", joinAddr(cfg.Host, cfg.Port), err)
	}

	n := &Node{
		lookup:   lk,
		cfg:      cfg,
		log:      cfg.Logger.With(slog.String("member_id", system.ID)),
		system:   system,
		cluster:  c,
		provider: provider,
		stopped:  make(chan struct{}),
	}
	n.log.Info("cluster node started",
		slog.String("address", n.Address()),
		slog.String("gossip_address", n.GossipAddress()),
		slog.Any("kinds", kindNames(cfg.Kinds)),
		slog.Bool("secured", creds != nil))
	switch {
	case creds != nil:
		n.log.Info("cluster traffic is authenticated and encrypted: mutual TLS on the remote, encrypted gossip",
			slog.Any("trusted_ca_ids", creds.caIDs))
	case !loopbackHost(cfg.Host) || !loopbackHost(cfg.GossipHost):
		n.log.Warn("!!! cluster traffic is in CLEAR and UNAUTHENTICATED on an address other hosts can reach: anyone who reaches the cluster or gossip port can command this node's grains. Set HOOKLINE_CLUSTER_SECRET on every node !!!")
	}
	return n, nil
}

// startMember runs protoactor's StartMember, which reports failures (a
// port in use, memberlist not starting) by panicking.
func startMember(c *pcluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	c.StartMember()
	return nil
}

// abandon releases what a failed start acquired. Each step may find its
// part never started, hence the recover.
func abandon(c *pcluster.Cluster, p *memberlist.Provider) {
	_ = p.Shutdown(false)
	c.ActorSystem.Shutdown()
	func() {
		defer func() { _ = recover() }()
		if c.Remote != nil {
			c.Remote.Shutdown(false)
		}
	}()
}

// Request sends msg to the grain kind/identity, activating it on its owner
// if needed, and returns the grain's answer. It makes at most three
// attempts, each bounded by Config.RequestTimeout and by ctx: the first
// attempt after a member died may go to the dead member, and the next one
// reaches the grain's new owner.
//
// A command must run once, so an attempt that may have reached the grain
// is repeated only when repeating it is safe (see retrySafe): msg carries a
// request id (the grain answers a repeat from the events of the first run),
// or it changes nothing. An attempt that cannot have reached the grain (no
// owner answered the lookup, or the message went to dead letters: the
// grain had stopped) is always repeated; so is an answer in which the grain
// says it did not act (it was stopping: ABORTED or UNAVAILABLE) when
// repeating is safe. Errors wrap [ErrUnavailable] when no attempt is left
// or repeating is not safe, [ErrStopped] once Stop has begun, or ctx's
// error.
func (n *Node) Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error) {
	safe := retrySafe(msg)
	var last error
	for attempt := 1; attempt <= requestAttempts; attempt++ {
		if attempt > 1 {
			// The failure may have been a stale cached PID; forget it so
			// the identity lookup is asked again. A grain that stopped (a
			// dead letter: it passivated, or moved away) is looked up again
			// at once; other failures may be a topology change in flight,
			// given time to land.
			n.cluster.PidCache.Remove(identity, kind)
			d := retryPause << (attempt - 2)
			if attempt == 2 && errors.Is(last, errNotDelivered) {
				d = 0
			}
			if err := pause.For(ctx, d); err != nil {
				return nil, fmt.Errorf("request %s/%s: %w", kind, identity, err)
			}
		}
		resp, err := n.attempt(ctx, kind, identity, msg)
		switch {
		case err == nil:
			m, ok := resp.(proto.Message)
			if !ok {
				return nil, fmt.Errorf("request %s/%s: answer %T is not a protobuf message", kind, identity, resp)
			}
			if safe && attempt < requestAttempts && stoppedAnswer(m) {
				last = fmt.Errorf("the grain was stopping: %v", m)
				continue
			}
			return m, nil
		case errors.Is(err, ErrStopped):
			return nil, fmt.Errorf("request %s/%s: %w", kind, identity, err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("request %s/%s: %w", kind, identity, ctx.Err())
		case !errors.Is(err, errNotDelivered) && !safe:
			// It may have run: running it again could do it twice.
			return nil, fmt.Errorf("request %s/%s: %w (not repeated: it may have run, and it carries no request id): %w", kind, identity, ErrUnavailable, err)
		}
		last = err
		n.log.Debug("cluster request attempt failed", slog.String("kind", kind), slog.String("identity", identity),
			slog.Int("attempt", attempt), slog.Any("error", err))
	}
	return nil, fmt.Errorf("request %s/%s: %w after %d attempts: %w", kind, identity, ErrUnavailable, requestAttempts, last)
}

// Tell sends msg to the grain kind/identity without waiting for its
// answer when the grain is active on this node: a hint (a wake) then costs
// one message, not a round trip. A grain not active here is reached by
// Request, which activates it on its owner. Like any hint, msg may be lost
// (the grain may stop as it is sent); an error says it was not delivered.
func (n *Node) Tell(ctx context.Context, kind, identity string, msg proto.Message) error {
	if pid, ok := n.cluster.PidCache.Get(identity, kind); ok && pid.Address == n.system.Address() {
		if _, alive := n.system.ProcessRegistry.GetLocal(pid.Id); alive {
			n.system.Root.Send(actor.NewPID(pid.Address, pid.Id), msg)
			return nil
		}
	}
	_, err := n.Request(ctx, kind, identity, msg)
	return err
}

// TellLocal sends msg to the grain kind/identity only if it is active on
// this node, and reports whether it did: it never activates a grain and
// never crosses the network, so msg may be any value the grain knows (not
// only a protobuf message). Like Tell, a hint that may be lost.
func (n *Node) TellLocal(kind, identity string, msg any) bool {
	pid, ok := n.cluster.PidCache.Get(identity, kind)
	if !ok || pid.Address != n.system.Address() {
		return false
	}
	if _, alive := n.system.ProcessRegistry.GetLocal(pid.Id); !alive {
		return false
	}
	n.system.Root.Send(actor.NewPID(pid.Address, pid.Id), msg)
	return true
}

// PartitionOwner returns the address of the member that owns partition p
// now ([Config.Owners], or p's target); "" when none does.
func (n *Node) PartitionOwner(p events.Partition) string {
	return n.lookup.partitionOwner(p)
}

// Ranking returns the ranking of the members hosting the partitioned kind,
// as of the last topology this node applied.
func (n *Node) Ranking() *Ranking { return n.lookup.ranking.Load() }

// Rebalance stops the grains of this member that another member owns now
// (after a change of [Config.Owners]); their next request activates them
// on their owner.
func (n *Node) Rebalance() { n.system.Root.Send(n.lookup.placement, rebalance{}) }

// errNotDelivered marks an attempt that cannot have reached the grain.
var errNotDelivered = errors.New("not delivered")

// retrySafe reports whether msg may be sent again after an attempt that
// may have reached the grain: it carries a request id, or it is a grain
// command that changes nothing (a wake, a read, a quota lease).
func retrySafe(msg proto.Message) bool {
	if r, ok := msg.(interface{ GetRequestId() string }); ok && r.GetRequestId() != "" {
		return true
	}
	switch m := msg.(type) {
	case *internalv1.EndpointCommand:
		return m.GetWake() != nil || m.GetGet() != nil || m.GetGetRecovery() != nil || m.GetListRecoveries() != nil
	case *internalv1.TenantCommand:
		return m.GetGet() != nil || m.GetLease() != nil
	}
	return false
}

// stoppedAnswer reports whether a grain's answer says it did not act
// because it was stopping (or had lost its stream to another activation).
func stoppedAnswer(m proto.Message) bool {
	e, ok := m.(interface{ GetError() *internalv1.GrainError })
	if !ok || e.GetError() == nil {
		return false
	}
	switch e.GetError().GetCode() {
	case internalv1.GrainError_CODE_ABORTED, internalv1.GrainError_CODE_UNAVAILABLE:
		return true
	}
	return false
}

// attempt makes one request: it finds the grain's PID (the cache, or the
// identity lookup, which activates the grain on its owner) and requests
// through the actor system's root context, with its own timeout. An
// attempt whose message cannot have reached the grain fails with
// errNotDelivered; one that timed out may have reached it.
func (n *Node) attempt(ctx context.Context, kind, identity string, msg proto.Message) (any, error) {
	timeout := n.cfg.RequestTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	n.mu.Lock()
	if n.stopping {
		n.mu.Unlock()
		return nil, ErrStopped
	}
	n.attempts.Add(1)
	n.mu.Unlock()

	type answer struct {
		resp any
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		defer n.attempts.Done()
		pid, _ := n.cluster.PidCache.Get(identity, kind)
		if pid != nil && kind == n.cfg.PartitionedKind && pid.Address != n.PartitionOwner(events.PartitionOf(identity)) {
			// The partition moved since: the cached grain is not its
			// owner's, and may still run there for a moment.
			n.cluster.PidCache.Remove(identity, kind)
			pid = nil
		}
		if pid != nil && pid.Address == n.system.Address() {
			if _, alive := n.system.ProcessRegistry.GetLocal(pid.Id); !alive {
				// A grain of this node that stopped (passivated): ask the
				// lookup at once rather than meet its dead letter.
				n.cluster.PidCache.Remove(identity, kind)
				pid = nil
			}
		}
		if pid == nil {
			// The owner's placement actor activates the grain; nil when no
			// member hosts the kind or the owner did not answer in time.
			got := n.cluster.Get(identity, kind)
			if got == nil {
				done <- answer{err: fmt.Errorf("no owner of %s/%s answered: %w", kind, identity, errNotDelivered)}
				return
			}
			pid = actor.NewPID(got.Address, got.Id)
			n.cluster.PidCache.Set(identity, kind, pid)
		}
		// Send through a copy: a PID remembers the process it last reached,
		// so a cached PID that reached a grain of this node would keep the
		// whole grain in memory after it passivated (until the cache entry
		// is used again or dropped).
		resp, err := n.system.Root.RequestFuture(actor.NewPID(pid.Address, pid.Id), msg, timeout).Result()
		if errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, remote.ErrDeadLetter) {
			n.cluster.PidCache.Remove(identity, kind)
			err = fmt.Errorf("%w: %w", errNotDelivered, err)
		}
		done <- answer{resp, err}
	}()
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case a := <-done:
		return a.resp, a.err
	case <-actx.Done():
		// The activation may still be under way (the lookup waits up to
		// RequestTimeout on an unreachable owner); it ends on its own and
		// Stop waits for it.
		return nil, fmt.Errorf("attempt: %w", actx.Err())
	}
}

// Members returns the members this node currently routes to, sorted by id.
// The set is the one protoactor had fully applied, placement included.
func (n *Node) Members() []Member {
	ms := n.provider.Members()
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		kinds := slices.DeleteFunc(slices.Clone(m.Kinds), func(k string) bool {
			return k == pcluster.TopicActorKind || k == memberlist.StartingKind
		})
		slices.Sort(kinds)
		out = append(out, Member{ID: m.Id, Address: m.Address(), Kinds: kinds})
	}
	return out
}

// OthersReady reports whether a member other than this one is up and
// ready: it does not carry the starting mark of a member that is still
// catching up (Config.Warming, Ready).
func (n *Node) OthersReady() bool {
	for _, m := range n.provider.Members() {
		if m.Id != n.system.ID && !slices.Contains(m.Kinds, memberlist.StartingKind) {
			return true
		}
	}
	return false
}

// Hosting returns the addresses of the members that host kind, sorted by
// member id.
func (n *Node) Hosting(kind string) []string {
	var out []string
	for _, m := range n.Members() {
		if slices.Contains(m.Kinds, kind) {
			out = append(out, m.Address)
		}
	}
	return out
}

// ID returns this node's member id (its actor system id), unique per start.
func (n *Node) ID() string { return n.system.ID }

// Address returns protoactor's remote address (host:port) of this node,
// with the port chosen when Config.Port was [AnyPort].
func (n *Node) Address() string { return n.system.Address() }

// GossipAddress returns memberlist's address (host:port) of this node, the
// seed other nodes join; with the port chosen when Config.GossipPort was
// [AnyPort].
func (n *Node) GossipAddress() string { return n.provider.Addr() }

// ActorSystem returns the node's protoactor actor system, for spawning
// local actors; protoactor's cluster is reachable from it with
// cluster.GetCluster.
func (n *Node) ActorSystem() *actor.ActorSystem { return n.system }

// Run blocks until ctx ends, then stops the node gracefully, allowing the
// stop thirty seconds. It suits an errgroup in cmd.
func (n *Node) Run(ctx context.Context) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runStopTimeout)
	defer cancel()
	return n.Stop(sctx)
}

// Ready tells the cluster this member is ready (Config.Warming): from
// then on it hosts grains of every kind it has. Later calls, and calls on
// a member started without Warming, do nothing.
func (n *Node) Ready() error {
	return n.provider.Ready()
}

// Stop leaves the cluster gracefully and releases the node, in
// protoactor's Cluster.Shutdown(true) order: the actor system stops its
// gossip loop; memberlist gossips the leave (so the other members drop
// this node at once and re-place its grains) and stops; this node's grains
// are stopped; after protoactor's fixed two-second hand-over pause the
// remote stops. Requests made after Stop has begun fail with [ErrStopped].
// Stop waits for the shutdown or for ctx, whichever ends first; if ctx ends
// first the shutdown goes on in the background and a later Stop waits for
// it again. Stop may be called more than once and concurrently.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.mu.Lock()
		n.stopping = true
		n.mu.Unlock()
		start := time.Now()
		go func() {
			defer close(n.stopped)
			n.stopErr = shutdown(func() { n.cluster.Shutdown(true) }, func() { n.cluster.Remote.Shutdown(false) }, n.log)
			n.attempts.Wait()
			n.log.Info("cluster node stopped", slog.Duration("took", time.Since(start)))
		}()
	})
	select {
	case <-n.stopped:
		if n.stopErr != nil {
			return fmt.Errorf("stop node %s: %w", n.ID(), n.stopErr)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop node %s: %w", n.ID(), ctx.Err())
	}
}

// shutdown runs protoactor's graceful cluster shutdown (stop), turning a
// panic into an error. One panic is protoactor's own race and is not the
// node's failure: its remote's last step tells each connection's reader
// that it leaves by sending on the reader's channel, which a reader whose
// stream has just failed closes before it forgets it ("send on closed
// channel"). The cluster has been left by then; only the remote's server
// was still to stop, which kill does.
func shutdown(stop, kill func(), log *slog.Logger) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if re, ok := r.(runtime.Error); ok && re.Error() == "send on closed channel" {
			log.Warn("protoactor's remote panicked in its last step (a connection closing at the same time); its server is stopped", slog.Any("panic", re))
			err = killed(kill)
			return
		}
		err = panicError(r)
	}()
	stop()
	return nil
}

// killed runs kill, turning a panic into an error.
func killed(kill func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	kill()
	return nil
}

func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("protoactor: %w", err)
	}
	return fmt.Errorf("protoactor: %v", r)
}

func kindNames(kinds []*pcluster.Kind) []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Kind
	}
	return names
}

func joinAddr(host string, port int) string {
	if port == AnyPort {
		port = 0
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// minLevel drops records below min before they reach the wrapped handler.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
