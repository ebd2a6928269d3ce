package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/dispatch"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/operational"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/owners"
	"github.com/hookline/hookline/projections/portal"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/reconcile"
	"github.com/hookline/hookline/seal"
	"github.com/hookline/hookline/seal/kekstore"
)

// Server is one running Hookline node.
type Server struct {
	cfg      Config
	log      events.Log
	ownsLog  bool
	keyring  *seal.Keyring
	payloads *seal.Payloads   // nil: payloads in clear
	keks     *kekstore.Store  // the vault's KEKs (--vault-kek); nil: none
	archive  *archive.Archive // nil: none
	// purged and purgedFor: when the archive was last purged of what
	// tenants' own retention no longer keeps, and for which (retention.go).
	purged    time.Time
	purgedFor map[string]time.Duration
	sweeps    map[string]retentionSweep // tenants' retention sweeps (retention.go); the retention loop's alone
	runner    *projections.Runner
	registry  *registry.Registry
	portal    *portal.Tokens
	owners    *owners.Owners // the partition table, from the log
	parts     *partitions    // decides which partitions this node applies and serves
	due       *due.Due
	history   *history.History
	opsFeed   *operational.Feed    // Hookline's own events, by partition
	opsEmit   *operational.Emitter // publishes opsFeed's entries of this node's partitions
	hist      *histories           // the cluster-wide history the control API reads
	waker     *waker
	started   atomic.Pointer[cluster.Node] // the node, once Start returned
	dispatch  *dispatch.Dispatcher
	attempts  *attempt.Client
	node      *cluster.Node
	control   *control.Server
	grpc      *grpc.Server
	http      *http.Server
	grpcLis   net.Listener
	gwConn    *grpc.ClientConn // the REST gateway's connection to grpc
	httpLis   net.Listener
	certs     *certFile    // nil unless the API serves TLS
	pprof     *http.Server // nil unless PprofAddr is set
	pprofLis  net.Listener
	logger    *slog.Logger
	metrics   *metrics
	tasks     sync.WaitGroup // the endpoint grains' attempts and pulls
	pulls     *pulls         // the grains' due puller, noting when each endpoint pulled
	recon     *reconciles
	backdrop  *reconcile.Background // nil when off
	settle    *settlement           // waits for every member's projections
	drain     endpoint.Drain        // started on a graceful stop
	rawLog    events.Log            // the log as opened, before timing
	openedAt  events.Position       // the log's head when this process opened it
	appended  appendMarks           // the endpoint grains' last appends, by partition
}

// New builds a node in named steps: the log, the master key, the
// projections, the delivery engine, the cluster member and its services,
// the control API and its listeners. Serve them with Run. A step that
// fails releases what the earlier ones acquired.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, logger: cfg.Logger}
	defer func() {
		if err != nil {
			s.abandon(ctx)
		}
	}()
	for _, step := range []func(context.Context) error{
		s.openStores,
		s.openProjections,
		s.buildDelivery,
		s.startMember,
		s.startServices,
		s.buildAPI,
		s.listen,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openStores opens the data directory, the log (timed, with any faults)
// and the master keyring, and checks that the secrets in the log open
// with this node's keys before anything is sealed.
func (s *Server) openStores(ctx context.Context) error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if err := s.openArchive(ctx); err != nil {
		return err
	}
	if err := s.openLog(ctx); err != nil {
		return err
	}
	s.metrics = newMetrics()
	s.rawLog = s.log
	if cfg.Faults.Active() {
		cfg.Logger.Warn("!!! FAULT INJECTION IS ON: this node fails on purpose (tests and acceptance runs only) !!!", slog.String("faults", cfg.Faults.String()))
	}
	s.log = timedLog{Log: cfg.Faults.Log(s.log), seconds: s.metrics.appendSeconds}
	var err error
	if s.keyring, err = loadKeyring(cfg); err != nil {
		return err
	}
	if err := seal.CheckLog(ctx, s.log, s.keyring, cfg.Now()); err != nil {
		return fmt.Errorf("master key: %w", err)
	}
	if s.openedAt, err = s.log.Head(ctx); err != nil {
		return fmt.Errorf("read the log's head: %w", err)
	}
	vault, ok := s.rawLog.(events.Vault)
	if !ok {
		if cfg.VaultKEK != "" {
			return errors.New("--vault-kek: this node's store keeps no vault (KurrentDB keeps payloads in clear); use the embedded or PostgreSQL store, or leave it out")
		}
		return nil
	}
	s.payloads = seal.NewPayloads(vault, s.keyring, func(tenantID, id string) bool {
		return s.registry != nil && s.registry.DataKeyErased(tenantID, id)
	})
	if cfg.PlainPayloads {
		s.payloads.Plain() // it still opens what others sealed
	}
	if cfg.VaultKEK != "" {
		if s.keks, err = kekstore.Open(ctx, cfg.VaultKEK); err != nil {
			return err
		}
		s.payloads.UseKEKs(s.keks)
	}
	if err := s.payloads.StartKEKs(ctx); err != nil {
		return fmt.Errorf("the vault's key-encryption key: %w", err)
	}
	return nil
}

// openProjections opens the projection runner and registers every
// projection: registry, portal tokens, metrics, due, history, the
// operational feed.
func (s *Server) openProjections(context.Context) error {
	cfg := s.cfg
	var err error
	s.runner, err = projections.Open(cfg.Faults.ProjectionsLog(s.log), projections.Config{Dir: filepath.Join(cfg.DataDir, "projections"), FS: cfg.ProjectionsFS, Logger: cfg.Logger, Now: cfg.Now})
	if err != nil {
		return err
	}
	if s.registry, err = registry.New(s.runner); err != nil {
		return err
	}
	if s.portal, err = portal.New(s.runner); err != nil {
		return err
	}
	if s.owners, err = owners.New(s.runner); err != nil {
		return err
	}
	if _, err := s.runner.Register(s.metrics.view); err != nil {
		return err
	}
	s.waker = newWaker(cfg.Logger, s.heldBack)
	if s.due, err = due.New(s.runner, due.Config{
		Waker: cfg.Faults.Waker(s.waker), Now: cfg.Now, Logger: cfg.Logger, SweepInterval: cfg.SweepInterval, StaleAfter: cfg.StaleAfter,
		CheckpointAfter: checkpointAfter(cfg.Retention), Tokens: s.payloads,
	}); err != nil {
		return err
	}
	if s.history, err = history.New(s.runner, history.Config{Log: s.log, Archive: s.archiveReader(), Now: cfg.Now, Logger: cfg.Logger}); err != nil {
		return err
	}
	if s.opsFeed, err = operational.NewFeed(s.runner, operational.Config{Now: cfg.Now}); err != nil {
		return err
	}
	s.parts = newPartitions(s)
	return nil
}

// buildDelivery makes what the endpoint grains deliver with: the fair
// dispatcher, the egress client and the due puller.
func (s *Server) buildDelivery(context.Context) error {
	s.dispatch = dispatch.New(dispatch.Config{Slots: s.cfg.Slots, Now: s.cfg.Now, Weight: s.tenantWeight})
	s.attempts = attempt.NewClient(attempt.ClientConfig{Policy: s.cfg.Policy})
	s.pulls = newPulls(s.cfg.Faults.Puller(s.due), s.cfg.Now)
	s.metrics.nodeGauges(s)
	return nil
}

// startMember starts the cluster member hosting the tenant and endpoint
// grains; the projection runner follows the partitions it owns.
func (s *Server) startMember(ctx context.Context) error {
	cfg := s.cfg.Cluster
	cfg.Kinds = append(cfg.Kinds, s.kinds()...)
	cfg.Owners = s.parts
	cfg.OnTopology = func(*cluster.Ranking) { s.parts.wake() }
	cfg.Warming = true // tenant grains come here once it caught up (hostAll)
	n, err := cluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	s.node = n
	s.started.Store(n)
	s.waker.setNode(n)
	s.parts.start(n)
	return nil
}

// startServices starts the services every member runs beside its grains
// (see doc.go) and the reconciler.
func (s *Server) startServices(context.Context) error {
	timeout := s.node.RequestTimeout()
	s.hist = &histories{node: s.node, local: s.history, runner: s.runner, kind: endpoint.Kind, timeout: timeout, logger: s.logger}
	s.settle = &settlement{node: s.node, runner: s.runner, timeout: timeout, logger: s.logger}
	for _, err := range []error{
		s.node.Serve(historyService, timeout, s.hist.serve),
		s.node.Serve(retentionService, timeout, s.serveEnds),
		s.node.Serve(statusService, 2*time.Second, s.serveStatus),
		s.node.Receive(handOverService, s.receiveHandOver),
		s.node.Receive(partitionsService, s.parts.receive),
		s.node.Serve(settleService, timeout, s.settle.serve),
	} {
		if err != nil {
			return err
		}
	}
	return s.startReconcile()
}

// buildAPI builds the control API, and the emitter of operational events
// that publishes through it.
func (s *Server) buildAPI(context.Context) error {
	cfg := s.cfg
	var auditLink func(string) string
	auditUI := ""
	if storeKind(cfg.Store) == "eventstoredb" {
		auditLink, auditUI = esdbLink(cfg.Store), "eventstoredb"
	}
	var err error
	s.control, err = control.New(control.Config{
		Log: s.log, Grains: controlGrains{s.node}, Registry: s.registry, Projections: s.settle,
		History: s.hist, Reconciler: s.recon, AdminToken: cfg.AdminToken, Keyring: s.keyring, Payloads: s.payloads, Archive: s.apiArchive(), LogRetention: cfg.Retention, Now: cfg.Now, Logger: cfg.Logger,
		Portal: s.portal, Cluster: &statuses{srv: s, store: storeKind(cfg.Store), timeout: s.node.RequestTimeout()},
		AuditLink: auditLink, AuditUI: auditUI,
		MaxInFlight: cfg.MaxInFlight, MaxInFlightPerCaller: cfg.MaxInFlightPerCaller, MaxPlanned: cfg.MaxPlanned,
		DeliveryDeadline: cfg.Schedule.Deadline,
		HandOver:         s,
		Spans:            controlSpans(cfg.Spans),
		PlanFault:        cfg.Faults,
		ServedElsewhere:  s.node.OthersReady,
	})
	if err != nil {
		return err
	}
	s.opsEmit = operational.NewEmitter(s.opsFeed, s.control, operational.EmitterConfig{Logger: cfg.Logger})
	return nil
}

// abandon releases what a failed New acquired.
func (s *Server) abandon(ctx context.Context) {
	if s.node != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = s.node.Stop(sctx)
		cancel()
	}
	s.close()
}

func (s *Server) kinds() []*pcluster.Kind {
	return []*pcluster.Kind{
		tenant.NewKind(tenant.Config{
			Log: s.log, Now: s.cfg.Now, Logger: s.logger,
			DefaultAttemptsPerSecond: s.cfg.TenantAttemptsPerSecond, DefaultMaxInFlight: s.cfg.TenantMaxInFlight,
			IdleAfter: s.cfg.IdleAfter,
		}),
		endpoint.NewKind(endpoint.Config{
			Log: markedLog{Log: s.log, marks: &s.appended}, Keyring: s.keyring, Payloads: s.payloads, Archive: s.archiveReader(), EventRetention: s.cfg.Retention,
			Policy: s.cfg.Policy, Now: s.cfg.Now, Logger: s.logger,
			Due: s.pulls, OrderingKeys: s.due, Sequences: s.due, Projections: s.runner, CatchUpTo: s.catchUpTo, ProvisionalLease: s.parts.tookOverLately,
			StillRunning: s.parts.stillRunning, Outcomes: s.due, History: s.history, Attempts: s.cfg.Faults.Attempter(s.attempts),
			Dispatcher: s.dispatch, Grains: s.grainsOnceStarted(), Schedule: s.cfg.Schedule,
			Tasks: &s.tasks, Breaker: s.cfg.Breaker, Quarantine: endpoint.NewQuarantine(0, 0), Drain: &s.drain,
			IdleAfter: s.cfg.IdleAfter, Spans: endpointSpans(s.cfg.Spans),
		}),
	}
}

// endpointSpans and controlSpans pass Spans on, nil as a nil interface.
func endpointSpans(s Spans) endpoint.Spans {
	if s == nil {
		return nil
	}
	return s
}

func controlSpans(s Spans) control.Spans {
	if s == nil {
		return nil
	}
	return s
}

// Node returns the cluster node.
func (s *Server) Node() *cluster.Node { return s.node }

// archiveReader is the archive as a reader, a nil interface without one.
func (s *Server) archiveReader() events.StreamArchive {
	if s.archive == nil {
		return nil
	}
	return s.archive
}

// apiArchive is the archive as the control API reads it (throttled), a
// nil interface without one.
func (s *Server) apiArchive() events.StreamArchive {
	if s.archive == nil {
		return nil
	}
	return s.archive.Throttled()
}

// Vault returns the vault of the node's store, nil when it keeps none.
func (s *Server) Vault() events.Vault {
	v, _ := s.rawLog.(events.Vault)
	return v
}

// Log returns the node's event log.
func (s *Server) Log() events.Log { return s.log }

// Projections returns the node's projection runner.
func (s *Server) Projections() *projections.Runner { return s.runner }

// GRPCAddr and HTTPAddr return the bound addresses of the control API.
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }

// HTTPAddr returns the bound address of the REST API.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// Serving returns the delivery partitions this node serves now (runs their
// endpoint grains, attempts their deliveries), caught up.
func (s *Server) Serving() events.PartitionSet {
	p := s.runner.Serving()
	p.Remove(events.NoPartition)
	return p
}

// TLS reports whether the control API serves TLS.
func (s *Server) TLS() bool { return s.certs != nil }

// Run serves until ctx ends, then stops gracefully: health turns to not
// serving, the APIs drain, the node leaves the cluster, the projections and
// the log close. It returns the first error of any part.
func (s *Server) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	// The node's own workers run until it has handed its partitions over:
	// on a stop they go on while it leaves (see stop).
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	run := func(f func(context.Context) error) { g.Go(func() error { return ignoreCancel(f(work)) }) }
	run(s.runner.Run)
	run(s.due.Run)
	run(s.history.Run)
	run(func(ctx context.Context) error { return s.waker.Run(ctx, wakeWorkers) })
	run(s.opsEmit.Run)
	run(s.resumeRecoveries)
	run(s.parts.Run)
	run(s.becomeReady)
	if s.backdrop != nil {
		run(s.backdrop.Run)
	}
	run(s.runTenantRetention)
	// The log's own maintenance: retention, partitions.
	if l, ok := s.rawLog.(interface{ Run(context.Context) error }); ok && s.ownsLog {
		run(l.Run)
	}
	g.Go(func() error { return ignoreClosed(s.grpc.Serve(s.grpcLis)) })
	g.Go(func() error {
		if s.certs != nil {
			return ignoreClosed(s.http.ServeTLS(s.httpLis, "", ""))
		}
		return ignoreClosed(s.http.Serve(s.httpLis))
	})
	if s.pprof != nil {
		g.Go(func() error { return ignoreClosed(s.pprof.Serve(s.pprofLis)) })
	}
	g.Go(func() error {
		<-gctx.Done()
		defer stopWork()
		return s.stop(context.WithoutCancel(ctx))
	})
	err := g.Wait()
	// The grains are stopped; let their attempts and pulls end before the
	// projections and the log close under them.
	done := make(chan struct{})
	go func() { s.tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.logger.Warn("grain tasks still running 30 s after stop; closing anyway")
	}
	s.close()
	return err
}

// becomeReady marks the API ready once the projections have applied the
// log as it was when the node started: until then the registry may lag the
// log (its store keeps no write-ahead log: a crash loses its last
// batches), and a publish would plan for no endpoint, a valid key be
// refused. Calls wait for it (control.Server.Ready).
func (s *Server) becomeReady(ctx context.Context) error {
	for {
		head, err := s.log.Head(ctx)
		if err == nil {
			err = s.runner.WaitFor(ctx, head)
		}
		if err == nil {
			err = s.waitOwned(ctx)
		}
		if err == nil {
			s.control.Ready()
			return s.hostAll(ctx)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.logger.Warn("cannot tell whether the projections caught up with the log; trying again", slog.Any("error", err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// hostAll tells the cluster that this node hosts grains of every kind
// once the partitions it follows are live: before, while it catches them
// up, the other members keep its share of the tenant grains, whose quota
// leases every endpoint of their tenant waits on (ADR 0053). A member
// alone, or started with the others, hosts them meanwhile all the same.
func (s *Server) hostAll(ctx context.Context) error {
	if err := s.runner.WaitForPartitions(ctx, s.runner.Owned(), events.Position{}); err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("cannot tell whether the partitions this node follows caught up; it hosts no tenant grain while another member can", slog.Any("error", err))
		}
		return nil
	}
	if err := s.node.Ready(); err != nil {
		s.logger.Warn("cannot tell the other members this node is ready; they place no tenant grain here until they see it", slog.Any("error", err))
		return nil
	}
	s.logger.Info("caught up: hosting tenant grains")
	return nil
}

// waitOwned returns once every delivery partition has an owner in the
// table: at a cluster's first start, until the first member has recorded
// its START, no grain of an endpoint can be placed, and a call would spend
// its attempts on "no owner" and time out on the last.
func (s *Server) waitOwned(ctx context.Context) error {
	for {
		changed := s.owners.Changed()
		t, all := s.owners.Table(), true
		for p := events.Partition(1); p <= events.Partitions && all; p++ {
			all = t.Owners[p].Address != ""
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// stop stops the node gracefully: it hands every partition it owns to its
// next owner (each drained first: no attempt cut, none repeated), then the
// API refuses new calls and drains, any attempt left finishes, and the
// node leaves the cluster.
func (s *Server) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, leaveTimeout)
	s.parts.leave(lctx)
	lcancel()
	s.control.Shutdown()
	s.drainAttempts(ctx)
	if s.pprof != nil {
		_ = s.pprof.Close()
	}
	_ = s.http.Shutdown(ctx)
	stopGRPC(ctx, s.grpc)
	return s.node.Stop(ctx)
}

func (s *Server) close() {
	if s.gwConn != nil {
		_ = s.gwConn.Close()
	}
	if s.runner != nil {
		_ = s.runner.Close()
	}
	if s.ownsLog && s.log != nil {
		_ = s.log.Close()
	}
	if s.keks != nil {
		_ = s.keks.Close()
	}
	if s.archive != nil {
		_ = s.archive.Close()
	}
	if s.grpcLis != nil {
		_ = s.grpcLis.Close()
	}
	if s.httpLis != nil {
		_ = s.httpLis.Close()
	}
	if s.pprofLis != nil {
		_ = s.pprofLis.Close()
	}
}

func stopGRPC(ctx context.Context, g *grpc.Server) {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.Stop()
	}
}

func ignoreCancel(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// tenantWeight is a tenant's share in the dispatcher, from its quota.
func (s *Server) tenantWeight(tenantID string) int {
	t, ok, err := s.registry.Tenant(tenantID)
	if err != nil || !ok || t.Quota.Weight < 1 {
		return 1
	}
	return int(t.Quota.Weight)
}

// lateGrains reaches grains through the node once it has started; the
// kinds are built before the node exists.
type lateGrains struct{ node *atomic.Pointer[cluster.Node] }

func (g lateGrains) Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error) {
	n := g.node.Load()
	if n == nil {
		return nil, cluster.ErrUnavailable
	}
	return n.Request(ctx, kind, identity, msg)
}

// controlGrains reaches grains through the node for the control API: a
// request no member could serve answers UNAVAILABLE, so its caller retries.
type controlGrains struct{ node *cluster.Node }

func (g controlGrains) Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error) {
	m, err := g.node.Request(ctx, kind, identity, msg)
	if errors.Is(err, cluster.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", control.ErrUnavailable, err)
	}
	return m, err
}

func (s *Server) grainsOnceStarted() endpoint.Grains { return lateGrains{&s.started} }

// drainAttempts stops new attempts and waits, for at most drainTimeout,
// until the running ones have finished and their outcomes are recorded, so
// that the grains' next owners do not repeat them.
func (s *Server) drainAttempts(ctx context.Context) {
	s.drain.Start()
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	idle := 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for idle < 3 { // no slot in use at three checks in a row
		select {
		case <-ctx.Done():
			s.logger.Warn("attempts still running at stop; their deliveries may be attempted again by the next owners", slog.Int("running", max(s.dispatch.Stats().Used, s.drain.Total())))
			return
		case <-tick.C:
		}
		if s.dispatch.Stats().Used == 0 && s.drain.Total() == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	// The outcomes of the last attempts are appended right after them:
	// wait until the projections have them.
	if head, err := s.log.Head(ctx); err == nil {
		_ = s.runner.WaitFor(ctx, head)
	}
}
