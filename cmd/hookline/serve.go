package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// serve runs a node until ctx ends (SIGINT, SIGTERM). Its flags (the table
// serveFlags) become a node.Config in named steps.
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	s, err := parseServe(args)
	if err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	logger, err := newLogger(stderr, s.logLevel)
	if err != nil {
		return err
	}
	cfg, err := s.config(logger)
	if err != nil {
		return err
	}
	warnUnsafe(logger, cfg)
	spans, stopSpans, err := startSpans(ctx, s.otlpEndpoint, s.clusterAddr, logger)
	if err != nil {
		return err
	}
	defer stopSpans()
	cfg.Spans = spans
	srv, err := node.New(ctx, cfg)
	if err != nil {
		return err
	}
	logger.Info("hookline serving", slog.String("grpc_addr", srv.GRPCAddr()), slog.String("http_addr", srv.HTTPAddr()), slog.Bool("tls", srv.TLS()),
		slog.String("store", redactDSN(cfg.Store)), slog.String("data", cfg.DataDir), slog.String("node_id", srv.Node().ID()))
	err = srv.Run(ctx)
	logger.Info("hookline stopped")
	return err
}

// check refuses the settings that have no meaning, naming their flag.
func (s *serveSettings) check() error {
	n := &s.node
	switch {
	case n.TenantAttemptsPerSecond < 0 || n.TenantMaxInFlight < 0:
		return errors.New("--tenant-default-rate and --tenant-default-in-flight must be 0 (the default) or positive")
	case n.HTTPReadTimeout < 0 || n.MaxInFlight < 0 || n.MaxInFlightPerCaller < 0:
		return errors.New("--http-read-timeout, --max-in-flight and --max-in-flight-per-caller must be 0 (the default) or positive")
	case n.IdleAfter < 0:
		return fmt.Errorf("--idle-after %v: must be 0 (the default, 2m) or positive", n.IdleAfter)
	case s.standbys < 0 || s.standbys > 2:
		return fmt.Errorf("--standbys %d: give 0, 1 (the default) or 2", s.standbys)
	case (n.TLSCertFile == "") != (n.TLSKeyFile == ""):
		return errors.New("--tls-cert and --tls-key go together: give both, or neither for plaintext on loopback")
	}
	return nil
}

// newLogger is a text logger on stderr at level (debug, info, warn or
// error).
func newLogger(stderr io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})), nil
}

// config completes the node's Config: the faults, the egress policy, the
// cluster's addresses and secrets, and what comes from the environment
// only (the admin token, the master key).
func (s *serveSettings) config(logger *slog.Logger) (node.Config, error) {
	cfg := s.node
	cfg.Logger, cfg.Cluster.Logger = logger, logger
	cfg.Standbys = s.standbys
	if s.standbys == 0 {
		cfg.Standbys = -1 // none
	}
	cfg.AdminToken = os.Getenv("HOOKLINE_ADMIN_TOKEN")
	cfg.MasterKey = os.Getenv("HOOKLINE_MASTER_KEY")
	var err error
	if cfg.Faults, err = faultSet(s.faults); err != nil {
		return cfg, err
	}
	if cfg.Policy, err = egressPolicy(s.allowPrivate, s.ports, s.resolver); err != nil {
		return cfg, err
	}
	if cfg.Cluster.Host, cfg.Cluster.Port, err = splitPort("--cluster-addr", s.clusterAddr); err != nil {
		return cfg, err
	}
	if cfg.Cluster.GossipHost, cfg.Cluster.GossipPort, err = splitPort("--gossip-addr", s.gossipAddr); err != nil {
		return cfg, err
	}
	cfg.Cluster.Secrets, err = clusterSecrets(os.Getenv("HOOKLINE_CLUSTER_SECRET"), s.secretFile)
	return cfg, err
}

// faultSet parses --faults; nil when it injects nothing.
func faultSet(spec string) (*faults.Set, error) {
	fset, err := faults.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("--faults: %w", err)
	}
	if !fset.Active() {
		return nil, nil
	}
	return fset, nil
}

// egressPolicy is the policy of endpoint URLs: --allow-private-targets,
// --allowed-ports and --resolver.
func egressPolicy(allowPrivate bool, ports, resolver string) (*attempt.Policy, error) {
	policy := &attempt.Policy{AllowPrivate: allowPrivate}
	for _, p := range strings.Split(ports, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--allowed-ports: %q is not a port number; give ports from 1 to 65535, e.g. 443,8443", p)
		}
		policy.AllowedPorts = append(policy.AllowedPorts, uint16(n))
	}
	if resolver != "" {
		if _, _, err := net.SplitHostPort(resolver); err != nil {
			return nil, fmt.Errorf("--resolver %q: give HOST:PORT of a DNS server, e.g. 127.0.0.1:53", resolver)
		}
		policy.Resolver = attempt.NewDNSResolver(resolver)
	}
	return policy, nil
}

// warnUnsafe logs, loudly, each setting of cfg that is for development
// only or leaves a door open.
func warnUnsafe(logger *slog.Logger, cfg node.Config) {
	if cfg.TLSCertFile == "" {
		for _, a := range []struct{ flag, addr string }{{"--grpc-addr", cfg.GRPCAddr}, {"--http-addr", cfg.HTTPAddr}} {
			if !loopback(a.addr) {
				logger.Warn("!!! the control API is PLAINTEXT on an address other hosts can reach: bearer tokens and the whsec_ secrets it returns cross the network in clear. Give --tls-cert and --tls-key, or listen on loopback behind a TLS proxy !!!",
					slog.String("flag", a.flag), slog.String("addr", a.addr))
			}
		}
	}
	if cfg.Policy.AllowPrivate {
		logger.Warn("!!! --allow-private-targets is ON: endpoints may point at loopback and private networks and use plain http. DEVELOPMENT AND TESTS ONLY: never run a production node like this !!!")
	}
	if cfg.Cluster.Insecure && len(cfg.Cluster.Secrets) == 0 {
		logger.Warn("!!! --insecure-cluster is ON: the cluster and gossip ports accept anyone who reaches them. DEVELOPMENT ON A TRUSTED NETWORK ONLY !!!")
	}
	if cfg.AdminToken == "" {
		logger.Warn("HOOKLINE_ADMIN_TOKEN is not set: the admin API (tenants, keys) is disabled")
	}
}

// startSpans starts the export of the node's spans to an OTLP endpoint;
// with none it exports nothing. stop flushes what is left, within 5 s.
func startSpans(ctx context.Context, endpoint, instance string, logger *slog.Logger) (spans node.Spans, stop func(), err error) {
	if endpoint == "" {
		return nil, func() {}, nil
	}
	exp, err := otlp.New(ctx, otlp.Config{Endpoint: endpoint, Instance: instance, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	logger.Info("exporting spans over OTLP", slog.String("otlp_endpoint", redactDSN(endpoint)))
	return exp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := exp.Shutdown(sctx); err != nil {
			logger.Warn("spans not exported at stop", slog.Any("error", err))
		}
	}, nil
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
		return nil, errors.New("HOOKLINE_CLUSTER_SECRET and --cluster-secret-file are both set: give the secret one way")
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

// redactDSN hides the password of a connection string in logs.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return dsn
}
