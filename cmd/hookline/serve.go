package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/actors/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/faults"
)

// serve runs a node until ctx ends (SIGINT, SIGTERM).
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("hookline serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", envOr("HOOKLINE_DATA", "data"), "data directory: embedded log, projections, development master key (HOOKLINE_DATA)")
	httpAddr := fs.String("http-addr", envOr("HOOKLINE_HTTP_ADDR", "127.0.0.1:8080"), "REST listen address (HOOKLINE_HTTP_ADDR)")
	grpcAddr := fs.String("grpc-addr", envOr("HOOKLINE_GRPC_ADDR", "127.0.0.1:7070"), "gRPC listen address (HOOKLINE_GRPC_ADDR)")
	store := fs.String("store", envOr("HOOKLINE_STORE", "embedded"), "event log: embedded, a PostgreSQL URL postgres://user:pass@host:5432/db, or a KurrentDB connection string kurrentdb://host:2113 (HOOKLINE_STORE)")
	schema := fs.String("store-schema", os.Getenv("HOOKLINE_STORE_SCHEMA"), "PostgreSQL schema of the log, for --store postgres://… (HOOKLINE_STORE_SCHEMA; default hookline)")
	join := fs.String("join", os.Getenv("HOOKLINE_JOIN"), "comma-separated gossip addresses of nodes to join (HOOKLINE_JOIN)")
	clusterAddr := fs.String("cluster-addr", envOr("HOOKLINE_CLUSTER_ADDR", "127.0.0.1:7980"), "actor remote address, reachable by the other nodes (HOOKLINE_CLUSTER_ADDR)")
	gossipAddr := fs.String("gossip-addr", envOr("HOOKLINE_GOSSIP_ADDR", "127.0.0.1:7946"), "memberlist gossip address (HOOKLINE_GOSSIP_ADDR)")
	resolver := fs.String("resolver", os.Getenv("HOOKLINE_RESOLVER"), "HOST:PORT of the DNS server for endpoint lookups (HOOKLINE_RESOLVER)")
	ports := fs.String("allowed-ports", envOr("HOOKLINE_ALLOWED_PORTS", "443"), "comma-separated ports endpoint URLs may use (HOOKLINE_ALLOWED_PORTS)")
	allowPrivate := fs.Bool("allow-private-targets", envBool("HOOKLINE_ALLOW_PRIVATE_TARGETS"), "DEVELOPMENT ONLY: admit loopback/private targets and plain http (HOOKLINE_ALLOW_PRIVATE_TARGETS)")
	tenantRate := fs.Float64("tenant-default-rate", envFloat("HOOKLINE_TENANT_DEFAULT_RATE"), "attempts per second of a tenant whose quota leaves it 0; 0 means 100 (HOOKLINE_TENANT_DEFAULT_RATE)")
	tenantInFlight := fs.Int("tenant-default-in-flight", int(envFloat("HOOKLINE_TENANT_DEFAULT_IN_FLIGHT")), "attempts in flight of a tenant whose quota leaves it 0; 0 means 100 (HOOKLINE_TENANT_DEFAULT_IN_FLIGHT)")
	pprofAddr := fs.String("pprof-addr", os.Getenv("HOOKLINE_PPROF_ADDR"), "DEVELOPMENT ONLY: serve net/http/pprof on this loopback address, e.g. 127.0.0.1:6060; empty serves none (HOOKLINE_PPROF_ADDR)")
	logLevel := fs.String("log-level", envOr("HOOKLINE_LOG_LEVEL", "info"), "debug, info, warn or error (HOOKLINE_LOG_LEVEL)")
	reconcileEvery := fs.Duration("reconcile-every", envDuration("HOOKLINE_RECONCILE_EVERY"), "how often the background reconciler runs its cheap checks; 0 means 30s, negative turns it off (HOOKLINE_RECONCILE_EVERY)")
	notPulled := fs.Duration("not-pulled-after", envDuration("HOOKLINE_NOT_PULLED_AFTER"), "report due work that no grain pulled for this long; 0 means 1m (HOOKLINE_NOT_PULLED_AFTER)")
	faultSpec := fs.String("faults", "", "TESTS AND ACCEPTANCE RUNS ONLY: make this node fail on purpose, e.g. slow-append=20ms,duplicate-due (see package faults); no environment variable turns it on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	if *tenantRate < 0 || *tenantInFlight < 0 || *tenantInFlight > math.MaxInt32 {
		return fmt.Errorf("--tenant-default-rate and --tenant-default-in-flight must be 0 (the default) or positive")
	}
	fset, err := faults.Parse(*faultSpec)
	if err != nil {
		return fmt.Errorf("--faults: %w", err)
	}
	if !fset.Active() {
		fset = nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", *logLevel)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	policy := &attempt.Policy{AllowPrivate: *allowPrivate}
	for _, p := range strings.Split(*ports, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("--allowed-ports: %q is not a port number (1-65535)", p)
		}
		policy.AllowedPorts = append(policy.AllowedPorts, uint16(n))
	}
	if *resolver != "" {
		if _, _, err := net.SplitHostPort(*resolver); err != nil {
			return fmt.Errorf("--resolver %q: give HOST:PORT of a DNS server, e.g. 127.0.0.1:53", *resolver)
		}
		policy.Resolver = attempt.NewDNSResolver(*resolver)
	}
	if *allowPrivate {
		logger.Warn("!!! --allow-private-targets is ON: endpoints may point at loopback and private networks and use plain http. DEVELOPMENT AND TESTS ONLY: never run a production node like this !!!")
	}
	nodeCfg, err := nodeConfig(*clusterAddr, *gossipAddr, *join)
	if err != nil {
		return err
	}
	nodeCfg.Logger = logger
	admin := os.Getenv("HOOKLINE_ADMIN_TOKEN")
	if admin == "" {
		logger.Warn("HOOKLINE_ADMIN_TOKEN is not set: the admin API (tenants, keys) is disabled")
	}
	srv, err := cluster.NewServer(ctx, cluster.ServerConfig{
		DataDir:     *data,
		Store:       *store,
		StoreSchema: *schema,
		GRPCAddr:    *grpcAddr,
		HTTPAddr:    *httpAddr,
		Node:        nodeCfg,
		AdminToken:  admin,
		MasterKey:   os.Getenv("HOOKLINE_MASTER_KEY"),
		Policy:      policy,
		Logger:      logger,
		PprofAddr:   *pprofAddr,

		Faults:         fset,
		ReconcileEvery: *reconcileEvery,
		NotPulledAfter: *notPulled,

		TenantAttemptsPerSecond: *tenantRate,
		TenantMaxInFlight:       int32(*tenantInFlight),
	})
	if err != nil {
		return err
	}
	logger.Info("hookline serving", slog.String("grpc_addr", srv.GRPCAddr()), slog.String("http_addr", srv.HTTPAddr()),
		slog.String("store", redactDSN(*store)), slog.String("data", *data), slog.String("node_id", srv.Node().ID()))
	err = srv.Run(ctx)
	logger.Info("hookline stopped")
	return err
}

func nodeConfig(clusterAddr, gossipAddr, join string) (cluster.Config, error) {
	var c cluster.Config
	host, port, err := splitPort("--cluster-addr", clusterAddr)
	if err != nil {
		return c, err
	}
	c.Host, c.Port = host, port
	ghost, gport, err := splitPort("--gossip-addr", gossipAddr)
	if err != nil {
		return c, err
	}
	c.GossipHost, c.GossipPort = ghost, gport
	for _, s := range strings.Split(join, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Seeds = append(c.Seeds, s)
		}
	}
	return c, nil
}

func splitPort(flagName, addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s %q: give HOST:PORT", flagName, addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%s %q: the port must be a number from 0 to 65535", flagName, addr)
	}
	if port == 0 {
		port = cluster.AnyPort
	}
	return host, port, nil
}

// envFloat reads a number from the environment; unset or not a number is 0.
func envFloat(key string) float64 {
	v, _ := strconv.ParseFloat(os.Getenv(key), 64)
	return v
}

// envDuration reads a duration from the environment; unset or not a
// duration is 0.
func envDuration(key string) time.Duration {
	v, _ := time.ParseDuration(os.Getenv(key))
	return v
}

func envBool(key string) bool {
	v, _ := strconv.ParseBool(os.Getenv(key))
	return v
}

// redactDSN hides the password of a connection string in logs.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return dsn
}
