package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/cluster"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/console"
	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/dispatch"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/events/esdb"
	"github.com/hookline/hookline/events/postgres"
	"github.com/hookline/hookline/faults"
	"github.com/hookline/hookline/operational"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/portal"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/reconcile"
	"github.com/hookline/hookline/seal"
)

// ErrNoMasterKey refuses a node on a shared log without a configured
// master key: a development key file is created per node, so secrets
// sealed on one node would not open on another.
var ErrNoMasterKey = errors.New("cluster: a node on a shared log needs a master key, the same on every node: set HOOKLINE_MASTER_KEY (base64 of 32 random bytes; generate one with: head -c 32 /dev/urandom | base64) or HOOKLINE_MASTER_KEY_FILE; without it each node would seal secrets under a development key of its own that the other nodes cannot open")

// ErrEmbeddedJoin refuses a multi-node cluster on the embedded log, which
// lives in one node's data directory.
var ErrEmbeddedJoin = errors.New("cluster: the embedded log serves one node only; to join a cluster use a shared log (--store postgres://… or --store kurrentdb://…)")

// Config configures a whole Hookline node: its log, projections,
// grains, cluster membership and control API. The zero value runs a
// single embedded node in ./data on loopback ports.
type Config struct {
	// DataDir holds the embedded log, the projections and (in development)
	// the master key file. Default "./data".
	DataDir string
	// Store selects the log: "" or "embedded" for the embedded log in
	// DataDir, or an EventStoreDB/KurrentDB connection string
	// (kurrentdb://…, esdb://…, esdb+discover://…).
	Store string
	// StoreSchema is the PostgreSQL schema of the log (postgres stores
	// only); empty means the backend's default.
	StoreSchema string
	// Log, if set, is used instead of opening Store; the caller owns it.
	// Tests use it to run several nodes on one log in one process.
	Log events.Log
	// ProjectionsFS is the projections' file system; nil means the disk.
	ProjectionsFS vfs.FS
	// GRPCAddr and HTTPAddr are the control API's listen addresses;
	// defaults 127.0.0.1:7070 and 127.0.0.1:8080 (":0" picks a port).
	GRPCAddr string
	HTTPAddr string
	// TLSCertFile and TLSKeyFile, both or neither, are the PEM certificate
	// (chain) and key the control API serves gRPC and REST with; they are
	// reloaded when the files change. Neither means plaintext.
	TLSCertFile, TLSKeyFile string
	// Node configures membership and the actor system.
	Cluster cluster.Config
	// AdminToken authenticates operators (HOOKLINE_ADMIN_TOKEN).
	AdminToken string
	// MasterKey is HOOKLINE_MASTER_KEY; MasterKeyFile, a file holding the
	// same (HOOKLINE_MASTER_KEY_FILE). Neither means the development key
	// file in DataDir, which a node on a shared log refuses
	// ([ErrNoMasterKey]).
	MasterKey, MasterKeyFile string
	// Policy is the egress policy for endpoint URLs; nil means production
	// rules.
	Policy *attempt.Policy
	// Slots is the node's number of concurrent attempts, shared fairly
	// among tenants; 0 means the dispatcher's default (256).
	Slots int
	// SweepInterval and StaleAfter tune the due projection's sweeper (how
	// often it looks, and how long due work may wait before its endpoint is
	// woken again); zero means its defaults (5 s, 10 s). Tests with an
	// injected clock shorten them.
	SweepInterval, StaleAfter time.Duration
	// Breaker tunes the endpoints' circuit breakers; zero fields mean the
	// defaults.
	Breaker endpoint.BreakerConfig
	// Schedule is the retry schedule; its zero value is the default (base
	// 5 s, cap 1 h, 24 h deadline).
	Schedule attempt.Schedule
	// TenantAttemptsPerSecond and TenantMaxInFlight are the quota of a
	// tenant whose own quota leaves them 0; zero means the tenant grain's
	// defaults (100 attempts/s, 100 in flight).
	TenantAttemptsPerSecond float64
	TenantMaxInFlight       int32
	// PortalOrigins are the origins allowed to frame the tenant portal
	// (/console/portal), e.g. https://app.example.com; empty allows none.
	PortalOrigins []string
	// MaxInFlight and MaxInFlightPerCaller bound the control API's calls
	// in flight, in total and per tenant (or admin); zero means the
	// control package's defaults (512 and 64).
	MaxInFlight, MaxInFlightPerCaller int
	// HTTPReadTimeout bounds the reading of a whole REST request, body
	// included, so that a client trickling its body cannot hold a
	// connection; default 30 s.
	HTTPReadTimeout time.Duration
	// Faults injects failures at the node's seams (the log, the grains'
	// attempter and due puller, wakes, the projections' view of the log),
	// for tests and `hookline serve --faults` only; nil injects nothing.
	Faults *faults.Set
	// ReconcileEvery is how often the background reconciler runs its cheap
	// checks; 0 means reconcile.DefaultEvery (30 s), negative turns it off.
	ReconcileEvery time.Duration
	// NotPulledAfter is how long due work may wait on an endpoint whose
	// grain does not pull before reconcile reports it; 0 means
	// reconcile.DefaultNotPulledAfter (1 min).
	NotPulledAfter time.Duration
	// IdleAfter is the quiet period after which an idle tenant or endpoint
	// grain passivates (leaves memory until its next message); zero means
	// the grains' default (2 min).
	IdleAfter time.Duration
	// PprofAddr, when set, serves net/http/pprof on its own listener, for
	// profiling in development. Keep it on loopback: profiles expose the
	// process's memory and take its CPU. Empty (the default) serves none.
	PprofAddr string
	// Spans, if set, exports the node's spans (attempts and publishes) to
	// a collector (*otlp.Exporter, see tracing/otlp); nil exports none.
	// The caller shuts it down after Run.
	Spans Spans
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Spans exports attempts and publishes as spans of their traces; the
// grains and the control API call it and it must not block.
type Spans interface {
	endpoint.Spans
	control.Spans
}

// Server is one running Hookline node.
type Server struct {
	cfg      Config
	log      events.Log
	ownsLog  bool
	keyring  *seal.Keyring
	runner   *projections.Runner
	registry *registry.Registry
	portal   *portal.Tokens
	due      *due.Due
	history  *history.History
	opsFeed  *operational.Feed    // Hookline's own events, by partition
	opsEmit  *operational.Emitter // publishes opsFeed's entries of this node's partitions
	hist     *histories           // the cluster-wide history the control API reads
	waker    *waker
	started  atomic.Pointer[cluster.Node] // the node, once Start returned
	dispatch *dispatch.Dispatcher
	attempts *attempt.Client
	node     *cluster.Node
	control  *control.Server
	grpc     *grpc.Server
	http     *http.Server
	grpcLis  net.Listener
	gwConn   *grpc.ClientConn // the REST gateway's connection to grpc
	httpLis  net.Listener
	certs    *certFile    // nil unless the API serves TLS
	pprof    *http.Server // nil unless PprofAddr is set
	pprofLis net.Listener
	logger   *slog.Logger
	metrics  *metrics
	tasks    sync.WaitGroup // the endpoint grains' attempts and pulls
	pulls    *pulls         // the grains' due puller, noting when each endpoint pulled
	recon    *reconciles
	backdrop *reconcile.Background // nil when off
	drain    endpoint.Drain        // started on a graceful stop
	rawLog   events.Log            // the log as opened, before timing
}

// New opens the log and projections, starts the cluster node and
// binds the control API's listeners. Serve them with Run.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:7070"
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:8080"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPReadTimeout == 0 {
		cfg.HTTPReadTimeout = defaultHTTPReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Cluster.Logger == nil {
		cfg.Cluster.Logger = cfg.Logger
	}
	s := &Server{cfg: cfg, logger: cfg.Logger}
	defer func() {
		if err != nil {
			if s.node != nil {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				_ = s.node.Stop(sctx)
				cancel()
			}
			s.close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := s.openLog(ctx); err != nil {
		return nil, err
	}
	s.metrics = newMetrics()
	s.rawLog = s.log
	if cfg.Faults.Active() {
		cfg.Logger.Warn("!!! FAULT INJECTION IS ON: this node fails on purpose (tests and acceptance runs only) !!!", slog.String("faults", cfg.Faults.String()))
	}
	s.log = timedLog{Log: cfg.Faults.Log(s.log), seconds: s.metrics.appendSeconds}
	if s.keyring, err = loadKeyring(cfg); err != nil {
		return nil, err
	}
	// Before anything is sealed: the secrets in the log must open with
	// this node's keys, and its current key is registered.
	if err := seal.CheckLog(ctx, s.log, s.keyring, cfg.Now()); err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}

	s.runner, err = projections.Open(cfg.Faults.ProjectionsLog(s.log), projections.Config{Dir: filepath.Join(cfg.DataDir, "projections"), FS: cfg.ProjectionsFS, Logger: cfg.Logger, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	if s.registry, err = registry.New(s.runner); err != nil {
		return nil, err
	}
	if s.portal, err = portal.New(s.runner); err != nil {
		return nil, err
	}
	if _, err := s.runner.Register(s.metrics.view); err != nil {
		return nil, err
	}
	s.waker = newWaker(cfg.Logger, s.heldBack)
	if s.due, err = due.New(s.runner, due.Config{Waker: cfg.Faults.Waker(s.waker), Now: cfg.Now, Logger: cfg.Logger, SweepInterval: cfg.SweepInterval, StaleAfter: cfg.StaleAfter}); err != nil {
		return nil, err
	}
	if s.history, err = history.New(s.runner, history.Config{Log: s.log, Now: cfg.Now, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if s.opsFeed, err = operational.NewFeed(s.runner, operational.Config{Now: cfg.Now}); err != nil {
		return nil, err
	}
	s.dispatch = dispatch.New(dispatch.Config{Slots: cfg.Slots, Now: cfg.Now, Weight: s.tenantWeight})
	policy := cfg.Policy
	if policy == nil {
		policy = &attempt.Policy{}
	}
	s.attempts = attempt.NewClient(attempt.ClientConfig{Policy: policy})
	s.pulls = newPulls(cfg.Faults.Puller(s.due), cfg.Now)
	s.metrics.nodeGauges(s)

	nodeCfg := cfg.Cluster
	nodeCfg.Kinds = append(nodeCfg.Kinds, s.kinds()...)
	// Endpoint grains run on the owner of their delivery partition, which
	// applies that partition's records to its projections.
	nodeCfg.PartitionedKind = endpoint.Kind
	nodeCfg.OnPartitions = s.runner.Own
	if s.node, err = cluster.Start(ctx, nodeCfg); err != nil {
		return nil, err
	}
	s.started.Store(s.node)
	s.waker.setNode(s.node)
	s.hist = &histories{node: s.node, local: s.history, runner: s.runner, kind: endpoint.Kind, timeout: s.node.RequestTimeout(), logger: cfg.Logger}
	if err := s.node.Serve(historyService, s.node.RequestTimeout(), s.hist.serve); err != nil {
		return nil, err
	}
	if err := s.node.Serve(statusService, 2*time.Second, s.serveStatus); err != nil {
		return nil, err
	}
	if err := s.node.Receive(handOverService, s.receiveHandOver); err != nil {
		return nil, err
	}
	settle := &settlement{node: s.node, runner: s.runner, timeout: s.node.RequestTimeout(), logger: cfg.Logger}
	if err := s.node.Serve(settleService, s.node.RequestTimeout(), settle.serve); err != nil {
		return nil, err
	}
	if err := s.startReconcile(); err != nil {
		return nil, err
	}
	var auditLink func(string) string
	auditUI := ""
	if storeKind(cfg.Store) == "eventstoredb" {
		auditLink, auditUI = esdbLink(cfg.Store), "eventstoredb"
	}

	s.control, err = control.New(control.Config{
		Log: s.log, Grains: s.node, Registry: s.registry, Projections: settle,
		History: s.hist, Reconciler: s.recon, AdminToken: cfg.AdminToken, Keyring: s.keyring, Now: cfg.Now, Logger: cfg.Logger,
		Portal: s.portal, Cluster: &statuses{srv: s, store: storeKind(cfg.Store), timeout: s.node.RequestTimeout()},
		AuditLink: auditLink, AuditUI: auditUI,
		MaxInFlight: cfg.MaxInFlight, MaxInFlightPerCaller: cfg.MaxInFlightPerCaller,
		HandOver: s,
		Spans:    controlSpans(cfg.Spans),
	})
	if err != nil {
		return nil, err
	}
	s.opsEmit = operational.NewEmitter(s.opsFeed, s.control, operational.EmitterConfig{Logger: cfg.Logger})
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("grpc listen %s: %w", cfg.GRPCAddr, err)
	}
	s.grpcLis = netutil.LimitListener(s.grpcLis, maxConns)
	if s.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("http listen %s: %w", cfg.HTTPAddr, err)
	}
	s.httpLis = netutil.LimitListener(s.httpLis, maxConns)
	grpcOpts, gwCreds := []grpc.ServerOption(nil), insecure.NewCredentials()
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
			return nil, errors.New("tls: give both the certificate and the key file, or neither")
		}
		if s.certs, err = loadCertFile(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.Logger, time.Now); err != nil {
			return nil, err
		}
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(s.certs.serverConfig())))
		gwCreds = credentials.NewTLS(s.certs.selfConfig())
	}
	s.grpc = s.control.NewGRPCServer(grpcOpts...)
	s.gwConn, err = grpc.NewClient(s.grpcLis.Addr().String(), grpc.WithTransportCredentials(gwCreds))
	if err != nil {
		return nil, fmt.Errorf("gateway connection: %w", err)
	}
	h, err := s.control.Handler(ctx, s.gwConn)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	ch, err := console.Handler(console.Config{PortalOrigins: cfg.PortalOrigins})
	if err != nil {
		return nil, err
	}
	mux.Handle(console.Path, ch)
	mux.Handle("/", h)
	s.http = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	if s.certs != nil {
		s.http.TLSConfig = s.certs.serverConfig()
	}
	if cfg.PprofAddr != "" {
		if s.pprofLis, err = net.Listen("tcp", cfg.PprofAddr); err != nil {
			return nil, fmt.Errorf("pprof listen %s: %w", cfg.PprofAddr, err)
		}
		s.pprof = &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}
		cfg.Logger.Warn("pprof is ON: profiles of this process are served for development only", slog.String("pprof_addr", s.pprofLis.Addr().String()))
	}
	return s, nil
}

// pprofMux serves net/http/pprof's handlers under /debug/pprof/.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// loadKeyring loads the master keys: HOOKLINE_MASTER_KEY, its file, or,
// for a node on a log of its own, the development key file in DataDir
// (which seal.LoadKeyring creates, loudly).
func loadKeyring(cfg Config) (*seal.Keyring, error) {
	switch {
	case cfg.MasterKey != "" && cfg.MasterKeyFile != "":
		return nil, errors.New("master key: HOOKLINE_MASTER_KEY and HOOKLINE_MASTER_KEY_FILE are both set: give the key one way")
	case cfg.MasterKeyFile != "":
		kr, err := seal.LoadKeyFile(cfg.MasterKeyFile)
		if err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
		return kr, nil
	case strings.TrimSpace(cfg.MasterKey) == "" && sharedLog(cfg):
		return nil, ErrNoMasterKey
	}
	kr, _, err := seal.LoadKeyring(cfg.MasterKey, cfg.DataDir, cfg.Logger)
	return kr, err
}

// sharedLog reports whether the node's log is shared with other nodes: a
// PostgreSQL or KurrentDB store, or a cluster to join.
func sharedLog(cfg Config) bool {
	st := cfg.Store
	return len(cfg.Cluster.Seeds) > 0 || strings.HasPrefix(st, "postgres") || strings.HasPrefix(st, "kurrentdb") || strings.HasPrefix(st, "esdb")
}

func (s *Server) openLog(ctx context.Context) error {
	cfg := s.cfg
	if cfg.Log != nil {
		s.log = cfg.Log
		return nil
	}
	switch store := cfg.Store; {
	case store == "" || store == "embedded":
		if len(cfg.Cluster.Seeds) > 0 {
			return ErrEmbeddedJoin
		}
		l, err := embedded.Open(embedded.Config{Dir: filepath.Join(cfg.DataDir, "log"), Now: cfg.Now, Logger: cfg.Logger})
		if err != nil {
			return err
		}
		s.log, s.ownsLog = l, true
	case strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://"):
		l, err := postgres.Open(ctx, postgres.Config{DSN: store, Schema: cfg.StoreSchema, Now: cfg.Now, Logger: cfg.Logger})
		if err != nil {
			return err
		}
		s.log, s.ownsLog = l, true
	case strings.HasPrefix(store, "kurrentdb") || strings.HasPrefix(store, "esdb"):
		l, err := esdb.Open(ctx, esdb.Config{ConnectionString: store, Logger: cfg.Logger})
		if err != nil {
			return err
		}
		s.log, s.ownsLog = l, true
	default:
		return fmt.Errorf("store %q: use \"embedded\", a PostgreSQL URL (postgres://user:pass@host:5432/db) or a KurrentDB connection string (kurrentdb://host:2113?tls=false)", redact(store))
	}
	return nil
}

func (s *Server) kinds() []*pcluster.Kind {
	return []*pcluster.Kind{
		tenant.NewKind(tenant.Config{
			Log: s.log, Now: s.cfg.Now, Logger: s.logger,
			DefaultAttemptsPerSecond: s.cfg.TenantAttemptsPerSecond, DefaultMaxInFlight: s.cfg.TenantMaxInFlight,
			IdleAfter: s.cfg.IdleAfter,
		}),
		endpoint.NewKind(endpoint.Config{
			Log: s.log, Keyring: s.keyring, Policy: s.cfg.Policy, Now: s.cfg.Now, Logger: s.logger,
			Due: s.pulls, Projections: s.runner, History: s.history, Attempts: s.cfg.Faults.Attempter(s.attempts),
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

// Log returns the node's event log.
func (s *Server) Log() events.Log { return s.log }

// Projections returns the node's projection runner.
func (s *Server) Projections() *projections.Runner { return s.runner }

// GRPCAddr and HTTPAddr return the bound addresses of the control API.
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }

// HTTPAddr returns the bound address of the REST API.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// TLS reports whether the control API serves TLS.
func (s *Server) TLS() bool { return s.certs != nil }

// Run serves until ctx ends, then stops gracefully: health turns to not
// serving, the APIs drain, the node leaves the cluster, the projections and
// the log close. It returns the first error of any part.
func (s *Server) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ignoreCancel(s.runner.Run(gctx)) })
	g.Go(func() error { return ignoreCancel(s.due.Run(gctx)) })
	g.Go(func() error { return ignoreCancel(s.history.Run(gctx)) })
	g.Go(func() error { return ignoreCancel(s.waker.Run(gctx, wakeWorkers)) })
	g.Go(func() error { return ignoreCancel(s.opsEmit.Run(gctx)) })
	g.Go(func() error { return ignoreCancel(s.resumeRecoveries(gctx)) })
	if s.backdrop != nil {
		g.Go(func() error { return ignoreCancel(s.backdrop.Run(gctx)) })
	}
	// The log's own maintenance: retention, partitions.
	if l, ok := s.rawLog.(interface{ Run(context.Context) error }); ok && s.ownsLog {
		g.Go(func() error { return ignoreCancel(l.Run(gctx)) })
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
		s.control.Shutdown()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		s.drainAttempts(sctx)
		if s.pprof != nil {
			_ = s.pprof.Close()
		}
		_ = s.http.Shutdown(sctx)
		stopGRPC(sctx, s.grpc)
		return s.node.Stop(sctx)
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

func (s *Server) grainsOnceStarted() endpoint.Grains { return lateGrains{&s.started} }

// redact hides the password of a connection string in messages.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return dsn
}

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
			s.logger.Warn("attempts still running at stop; their deliveries may be attempted again by the next owners", slog.Int("running", s.dispatch.Stats().Used))
			return
		case <-tick.C:
		}
		if s.dispatch.Stats().Used == 0 {
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

// Timeouts of the REST listener; see Config.HTTPReadTimeout.
const (
	defaultHTTPReadTimeout = 30 * time.Second
	// httpWriteTimeout bounds a REST request from the end of its headers
	// to the end of its answer.
	httpWriteTimeout = 60 * time.Second
	// httpIdleTimeout closes a kept-alive connection with no request.
	httpIdleTimeout = 2 * time.Minute
	// maxConns caps the open connections of each API listener; over it,
	// new connections wait in the kernel's backlog.
	maxConns = 4096
)

// drainTimeout bounds the wait for running attempts on a graceful stop:
// one attempt's default timeout.
const drainTimeout = 15 * time.Second
