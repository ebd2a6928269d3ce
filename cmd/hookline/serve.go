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

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/faults"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/tracing/otlp"
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
	secretFile := fs.String("cluster-secret-file", os.Getenv("HOOKLINE_CLUSTER_SECRET_FILE"), "file holding the cluster secret(s), as HOOKLINE_CLUSTER_SECRET would; read at start (HOOKLINE_CLUSTER_SECRET_FILE)")
	insecureCluster := fs.Bool("insecure-cluster", envBool("HOOKLINE_INSECURE_CLUSTER"), "DEVELOPMENT ONLY: let a node without a cluster secret listen for the cluster on addresses other hosts can reach (HOOKLINE_INSECURE_CLUSTER)")
	masterKeyFile := fs.String("master-key-file", os.Getenv("HOOKLINE_MASTER_KEY_FILE"), "file holding the master key(s), as HOOKLINE_MASTER_KEY would; mode 0600 (HOOKLINE_MASTER_KEY_FILE)")
	resolver := fs.String("resolver", os.Getenv("HOOKLINE_RESOLVER"), "HOST:PORT of the DNS server for endpoint lookups (HOOKLINE_RESOLVER)")
	ports := fs.String("allowed-ports", envOr("HOOKLINE_ALLOWED_PORTS", "443"), "comma-separated ports endpoint URLs may use (HOOKLINE_ALLOWED_PORTS)")
	allowPrivate := fs.Bool("allow-private-targets", envBool("HOOKLINE_ALLOW_PRIVATE_TARGETS"), "DEVELOPMENT ONLY: admit loopback/private targets and plain http (HOOKLINE_ALLOW_PRIVATE_TARGETS)")
	tenantRate := fs.Float64("tenant-default-rate", envFloat("HOOKLINE_TENANT_DEFAULT_RATE"), "attempts per second of a tenant whose quota leaves it 0; 0 means 100 (HOOKLINE_TENANT_DEFAULT_RATE)")
	tenantInFlight := fs.Int("tenant-default-in-flight", int(envFloat("HOOKLINE_TENANT_DEFAULT_IN_FLIGHT")), "attempts in flight of a tenant whose quota leaves it 0; 0 means 100 (HOOKLINE_TENANT_DEFAULT_IN_FLIGHT)")
	pprofAddr := fs.String("pprof-addr", os.Getenv("HOOKLINE_PPROF_ADDR"), "DEVELOPMENT ONLY: serve net/http/pprof on this loopback address, e.g. 127.0.0.1:6060; empty serves none (HOOKLINE_PPROF_ADDR)")
	portalOrigins := fs.String("portal-origins", os.Getenv("HOOKLINE_PORTAL_ORIGINS"), "comma-separated origins allowed to frame the tenant portal (/console/portal), e.g. https://app.example.com; empty allows none (HOOKLINE_PORTAL_ORIGINS)")
	tlsCert := fs.String("tls-cert", os.Getenv("HOOKLINE_TLS_CERT"), "PEM certificate (chain) the API serves gRPC and REST with; reloaded when the file changes (HOOKLINE_TLS_CERT)")
	tlsKey := fs.String("tls-key", os.Getenv("HOOKLINE_TLS_KEY"), "PEM private key of --tls-cert; reloaded when the file changes (HOOKLINE_TLS_KEY)")
	readTimeout := fs.Duration("http-read-timeout", envDuration("HOOKLINE_HTTP_READ_TIMEOUT"), "longest a REST request may take to arrive, body included; 0 means 30s (HOOKLINE_HTTP_READ_TIMEOUT)")
	maxInFlight := fs.Int("max-in-flight", int(envFloat("HOOKLINE_MAX_IN_FLIGHT")), "API calls served at once, over gRPC and over REST each; 0 means 512 (HOOKLINE_MAX_IN_FLIGHT)")
	maxPerCaller := fs.Int("max-in-flight-per-caller", int(envFloat("HOOKLINE_MAX_IN_FLIGHT_PER_CALLER")), "API calls of one tenant (or the admin) served at once; 0 means 64 (HOOKLINE_MAX_IN_FLIGHT_PER_CALLER)")
	logLevel := fs.String("log-level", envOr("HOOKLINE_LOG_LEVEL", "info"), "debug, info, warn or error (HOOKLINE_LOG_LEVEL)")
	reconcileEvery := fs.Duration("reconcile-every", envDuration("HOOKLINE_RECONCILE_EVERY"), "how often the background reconciler runs its cheap checks; 0 means 30s, negative turns it off (HOOKLINE_RECONCILE_EVERY)")
	notPulled := fs.Duration("not-pulled-after", envDuration("HOOKLINE_NOT_PULLED_AFTER"), "report due work that no grain pulled for this long; 0 means 1m (HOOKLINE_NOT_PULLED_AFTER)")
	idleAfter := fs.Duration("idle-after", envDuration("HOOKLINE_IDLE_AFTER"), "quiet period after which an idle tenant or endpoint grain leaves memory (the next wake or command brings it back from its stream); 0 means 2m (HOOKLINE_IDLE_AFTER)")
	otlpEndpoint := fs.String("otlp-endpoint", os.Getenv("HOOKLINE_OTLP_ENDPOINT"), "an OpenTelemetry collector's OTLP/HTTP URL, e.g. http://collector:4318: export this node's spans (each attempt, each publish) there; empty exports none. OTEL_EXPORTER_OTLP_HEADERS and the other OTEL_EXPORTER_OTLP_* variables apply (HOOKLINE_OTLP_ENDPOINT)")
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
	if *readTimeout < 0 || *maxInFlight < 0 || *maxPerCaller < 0 {
		return fmt.Errorf("--http-read-timeout, --max-in-flight and --max-in-flight-per-caller must be 0 (the default) or positive")
	}
	if *idleAfter < 0 {
		return fmt.Errorf("--idle-after %v: must be 0 (the default, 2m) or positive", *idleAfter)
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
	if (*tlsCert == "") != (*tlsKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together: give both, or neither for plaintext on loopback")
	}
	if *tlsCert == "" {
		for _, a := range []struct{ flag, addr string }{{"--grpc-addr", *grpcAddr}, {"--http-addr", *httpAddr}} {
			if !loopback(a.addr) {
				logger.Warn("!!! the control API is PLAINTEXT on an address other hosts can reach: bearer tokens and the whsec_ secrets it returns cross the network in clear. Give --tls-cert and --tls-key, or listen on loopback behind a TLS proxy !!!",
					slog.String("flag", a.flag), slog.String("addr", a.addr))
			}
		}
	}
	if *allowPrivate {
		logger.Warn("!!! --allow-private-targets is ON: endpoints may point at loopback and private networks and use plain http. DEVELOPMENT AND TESTS ONLY: never run a production node like this !!!")
	}
	nodeCfg, err := nodeConfig(*clusterAddr, *gossipAddr, *join)
	if err != nil {
		return err
	}
	nodeCfg.Logger = logger
	if nodeCfg.Secrets, err = clusterSecrets(os.Getenv("HOOKLINE_CLUSTER_SECRET"), *secretFile); err != nil {
		return err
	}
	nodeCfg.Insecure = *insecureCluster
	if *insecureCluster && len(nodeCfg.Secrets) == 0 {
		logger.Warn("!!! --insecure-cluster is ON: the cluster and gossip ports accept anyone who reaches them. DEVELOPMENT ON A TRUSTED NETWORK ONLY !!!")
	}
	var spans node.Spans
	if *otlpEndpoint != "" {
		exp, err := otlp.New(ctx, otlp.Config{Endpoint: *otlpEndpoint, Instance: *clusterAddr, Logger: logger})
		if err != nil {
			return fmt.Errorf("--otlp-endpoint: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := exp.Shutdown(sctx); err != nil {
				logger.Warn("spans not exported at stop", slog.Any("error", err))
			}
		}()
		spans = exp
		logger.Info("exporting spans over OTLP", slog.String("otlp_endpoint", redactDSN(*otlpEndpoint)))
	}
	admin := os.Getenv("HOOKLINE_ADMIN_TOKEN")
	if admin == "" {
		logger.Warn("HOOKLINE_ADMIN_TOKEN is not set: the admin API (tenants, keys) is disabled")
	}
	srv, err := node.New(ctx, node.Config{
		DataDir:       *data,
		Store:         *store,
		StoreSchema:   *schema,
		GRPCAddr:      *grpcAddr,
		HTTPAddr:      *httpAddr,
		TLSCertFile:   *tlsCert,
		TLSKeyFile:    *tlsKey,
		Cluster:       nodeCfg,
		AdminToken:    admin,
		MasterKey:     os.Getenv("HOOKLINE_MASTER_KEY"),
		MasterKeyFile: *masterKeyFile,
		Policy:        policy,
		Logger:        logger,
		PprofAddr:     *pprofAddr,
		Spans:         spans,

		HTTPReadTimeout:      *readTimeout,
		MaxInFlight:          *maxInFlight,
		MaxInFlightPerCaller: *maxPerCaller,

		PortalOrigins: splitList(*portalOrigins),

		Faults:         fset,
		ReconcileEvery: *reconcileEvery,
		NotPulledAfter: *notPulled,
		IdleAfter:      *idleAfter,

		TenantAttemptsPerSecond: *tenantRate,
		TenantMaxInFlight:       int32(*tenantInFlight),
	})
	if err != nil {
		return err
	}
	logger.Info("hookline serving", slog.String("grpc_addr", srv.GRPCAddr()), slog.String("http_addr", srv.HTTPAddr()), slog.Bool("tls", srv.TLS()),
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

// clusterSecrets reads the cluster secrets from the environment's value or,
// when that is empty, from file. Errors never show a secret.
func clusterSecrets(env, file string) ([][]byte, error) {
	spec := strings.TrimSpace(env)
	if spec != "" && file != "" {
		return nil, fmt.Errorf("HOOKLINE_CLUSTER_SECRET and --cluster-secret-file are both set: give the secret one way")
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--cluster-secret-file: %w", err)
		}
		spec = strings.Join(strings.Fields(string(b)), ",")
	}
	if spec == "" {
		return nil, nil
	}
	secrets, err := cluster.ParseSecrets(spec)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	return secrets, nil
}

// loopback reports whether a listen address (host:port) is reachable from
// this host only. An empty host or an unspecified address listens on every
// interface; a name other than localhost may resolve anywhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
