package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/node"
)

// serveSettings is what serve's flags set: the node's Config, and the
// settings that serve's steps turn into parts of it.
type serveSettings struct {
	node node.Config
	// clusterAddr and gossipAddr (HOST:PORT) become Cluster.Host, Port,
	// GossipHost and GossipPort.
	clusterAddr, gossipAddr string
	// secretFile holds the cluster secrets: Cluster.Secrets.
	secretFile string
	// allowPrivate, ports and resolver make the egress Policy.
	allowPrivate    bool
	ports, resolver string
	logLevel        string
	otlpEndpoint    string
	faults          string
	// standbys becomes Standbys (0 here: none there).
	standbys int
}

// serveFlag is one flag of serve: a row of serveFlags.
type serveFlag struct {
	name string
	// env is the environment variable that sets the flag's default; ""
	// for none.
	env string
	// def is the default, as it would be written on the command line.
	def   string
	usage string
	// to is the field the flag sets: a *string, *bool, *int, *int32,
	// *float64, *time.Duration or *[]string (comma-separated).
	to func(s *serveSettings) any
}

// serveFlags is every flag of serve, in the order of its -h text.
var serveFlags = []serveFlag{
	{"data", "HOOKLINE_DATA", "data", "data directory: embedded log, projections, development master key",
		func(s *serveSettings) any { return &s.node.DataDir }},
	{"http-addr", "HOOKLINE_HTTP_ADDR", "127.0.0.1:8080", "REST listen address",
		func(s *serveSettings) any { return &s.node.HTTPAddr }},
	{"grpc-addr", "HOOKLINE_GRPC_ADDR", "127.0.0.1:7070", "gRPC listen address",
		func(s *serveSettings) any { return &s.node.GRPCAddr }},
	{"store", "HOOKLINE_STORE", "embedded", "event log: embedded, a PostgreSQL URL postgres://user:pass@host:5432/db, or a KurrentDB connection string kurrentdb://host:2113",
		func(s *serveSettings) any { return &s.node.Store }},
	{"store-schema", "HOOKLINE_STORE_SCHEMA", "", "PostgreSQL schema of the log, for --store postgres://… (empty: hookline)",
		func(s *serveSettings) any { return &s.node.StoreSchema }},
	{"join", "HOOKLINE_JOIN", "", "comma-separated gossip `addresses` of nodes to join",
		func(s *serveSettings) any { return &s.node.Cluster.Seeds }},
	{"cluster-addr", "HOOKLINE_CLUSTER_ADDR", "127.0.0.1:7980", "actor remote address, reachable by the other nodes",
		func(s *serveSettings) any { return &s.clusterAddr }},
	{"gossip-addr", "HOOKLINE_GOSSIP_ADDR", "127.0.0.1:7946", "memberlist gossip address",
		func(s *serveSettings) any { return &s.gossipAddr }},
	{"cluster-secret-file", "HOOKLINE_CLUSTER_SECRET_FILE", "", "file holding the cluster secret(s), as HOOKLINE_CLUSTER_SECRET would; read at start",
		func(s *serveSettings) any { return &s.secretFile }},
	{"insecure-cluster", "HOOKLINE_INSECURE_CLUSTER", "", "DEVELOPMENT ONLY: let a node without a cluster secret listen for the cluster on addresses other hosts can reach",
		func(s *serveSettings) any { return &s.node.Cluster.Insecure }},
	{"master-key-file", "HOOKLINE_MASTER_KEY_FILE", "", "file holding the master key(s), as HOOKLINE_MASTER_KEY would; mode 0600",
		func(s *serveSettings) any { return &s.node.MasterKeyFile }},
	{"resolver", "HOOKLINE_RESOLVER", "", "HOST:PORT of the DNS server for endpoint lookups",
		func(s *serveSettings) any { return &s.resolver }},
	{"allowed-ports", "HOOKLINE_ALLOWED_PORTS", "443", "comma-separated ports endpoint URLs may use",
		func(s *serveSettings) any { return &s.ports }},
	{"allow-private-targets", "HOOKLINE_ALLOW_PRIVATE_TARGETS", "", "DEVELOPMENT ONLY: admit loopback/private targets and plain http",
		func(s *serveSettings) any { return &s.allowPrivate }},
	{"tenant-default-rate", "HOOKLINE_TENANT_DEFAULT_RATE", "", "attempts per second of a tenant whose quota leaves it 0; 0 means 100",
		func(s *serveSettings) any { return &s.node.TenantAttemptsPerSecond }},
	{"tenant-default-in-flight", "HOOKLINE_TENANT_DEFAULT_IN_FLIGHT", "", "`attempts` in flight of a tenant whose quota leaves it 0; 0 means 100",
		func(s *serveSettings) any { return &s.node.TenantMaxInFlight }},
	{"pprof-addr", "HOOKLINE_PPROF_ADDR", "", "DEVELOPMENT ONLY: serve net/http/pprof on this loopback address, e.g. 127.0.0.1:6060; empty serves none",
		func(s *serveSettings) any { return &s.node.PprofAddr }},
	{"portal-origins", "HOOKLINE_PORTAL_ORIGINS", "", "comma-separated `origins` allowed to frame the tenant portal (/console/portal), e.g. https://app.example.com; empty allows none",
		func(s *serveSettings) any { return &s.node.PortalOrigins }},
	{"tls-cert", "HOOKLINE_TLS_CERT", "", "PEM certificate (chain) the API serves gRPC and REST with; reloaded when the file changes",
		func(s *serveSettings) any { return &s.node.TLSCertFile }},
	{"tls-key", "HOOKLINE_TLS_KEY", "", "PEM private key of --tls-cert; reloaded when the file changes",
		func(s *serveSettings) any { return &s.node.TLSKeyFile }},
	{"http-read-timeout", "HOOKLINE_HTTP_READ_TIMEOUT", "", "longest a REST request may take to arrive, body included; 0 means 30s",
		func(s *serveSettings) any { return &s.node.HTTPReadTimeout }},
	{"max-in-flight", "HOOKLINE_MAX_IN_FLIGHT", "", "API calls served at once, over gRPC and over REST each; 0 means 512",
		func(s *serveSettings) any { return &s.node.MaxInFlight }},
	{"max-in-flight-per-caller", "HOOKLINE_MAX_IN_FLIGHT_PER_CALLER", "", "API calls of one tenant (or the admin) served at once; 0 means 64",
		func(s *serveSettings) any { return &s.node.MaxInFlightPerCaller }},
	{"max-planned", "HOOKLINE_MAX_PLANNED", "", "deliveries one publish may plan (endpoints its type reaches in one tenant); a publish over it is refused; 0 means 10000",
		func(s *serveSettings) any { return &s.node.MaxPlanned }},
	{"retention", "HOOKLINE_RETENTION", "", "how long the log keeps event and delivery streams (tenant and endpoint streams are kept for good); 0 means 720h (30 days)",
		func(s *serveSettings) any { return &s.node.Retention }},
	{"archive", "HOOKLINE_ARCHIVE", "", "object storage `URL` (file:///path, s3://bucket?region=R, gs://bucket, azblob://container) that keeps what retention drops, read back by replays and event reads; empty drops for good",
		func(s *serveSettings) any { return &s.node.Archive }},
	{"vault-kek", "HOOKLINE_VAULT_KEK", "", "where the vault's key-encryption keys live, apart from it: file:///path or an object store `URL` (no versioning); each erasure destroys the one it replaces, so no earlier copy of the vault (a backup, PostgreSQL's WAL, a replica) opens; the same on every node",
		func(s *serveSettings) any { return &s.node.VaultKEK }},
	{"plain-payloads", "HOOKLINE_PLAIN_PAYLOADS", "", "keep payloads and response bodies in clear in the log, without per-tenant data keys: no erasure (for measuring what sealing costs)",
		func(s *serveSettings) any { return &s.node.PlainPayloads }},
	{"log-level", "HOOKLINE_LOG_LEVEL", "info", "debug, info, warn or error",
		func(s *serveSettings) any { return &s.logLevel }},
	{"reconcile-every", "HOOKLINE_RECONCILE_EVERY", "", "how often the background reconciler runs its cheap checks; 0 means 30s, negative turns it off",
		func(s *serveSettings) any { return &s.node.ReconcileEvery }},
	{"not-pulled-after", "HOOKLINE_NOT_PULLED_AFTER", "", "report due work that no grain pulled for this long; 0 means 1m",
		func(s *serveSettings) any { return &s.node.NotPulledAfter }},
	{"standbys", "HOOKLINE_STANDBYS", "1", "members besides its owner that apply each delivery partition's records, ready to take it over at once if the owner is lost: 0, 1 or 2",
		func(s *serveSettings) any { return &s.standbys }},
	{"idle-after", "HOOKLINE_IDLE_AFTER", "", "quiet period after which an idle tenant or endpoint grain leaves memory (the next wake or command brings it back from its stream); 0 means 2m",
		func(s *serveSettings) any { return &s.node.IdleAfter }},
	{"otlp-endpoint", "HOOKLINE_OTLP_ENDPOINT", "", "an OpenTelemetry collector's OTLP/HTTP URL, e.g. http://collector:4318: export this node's spans (each attempt, each publish) there; empty exports none. OTEL_EXPORTER_OTLP_HEADERS and the other OTEL_EXPORTER_OTLP_* variables apply",
		func(s *serveSettings) any { return &s.otlpEndpoint }},
	{"faults", "", "", "TESTS AND ACCEPTANCE RUNS ONLY: make this node fail on purpose, e.g. slow-append=20ms,duplicate-due (see package faults); no environment variable turns it on",
		func(s *serveSettings) any { return &s.faults }},
}

// serveAbout is the paragraph of serve's -h text.
const serveAbout = `Runs a node until SIGINT or SIGTERM. Every flag but --faults has an
environment variable, named after it, that sets its default. The node also
reads HOOKLINE_ADMIN_TOKEN, HOOKLINE_MASTER_KEY and HOOKLINE_CLUSTER_SECRET.`

// parseServe parses serve's command line into settings, each flag's
// default taken from its environment variable when that is set.
func parseServe(args []string) (*serveSettings, error) {
	fs := newFlags("serve")
	s := &serveSettings{}
	for _, f := range serveFlags {
		if err := f.define(fs, s); err != nil {
			return nil, err
		}
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return s, nil
}

// define declares f on fs, with its default from the table or, when it is
// set, from f's environment variable.
func (f serveFlag) define(fs *flag.FlagSet, s *serveSettings) error {
	usage := f.usage
	if f.env != "" {
		usage += " (" + f.env + ")"
	}
	var kind string // what a value looks like, for an error
	switch p := f.to(s).(type) {
	case *string:
		fs.StringVar(p, f.name, "", usage)
	case *bool:
		fs.BoolVar(p, f.name, false, usage)
		kind = "true or false"
	case *int:
		fs.IntVar(p, f.name, 0, usage)
		kind = "a whole number"
	case *int32:
		fs.Var(int32Value{p}, f.name, usage)
		kind = "a whole number"
	case *float64:
		fs.Float64Var(p, f.name, 0, usage)
		kind = "a number"
	case *time.Duration:
		fs.DurationVar(p, f.name, 0, usage)
		kind = "a duration such as 30s or 2m"
	case *[]string:
		fs.Var(listValue{p}, f.name, usage)
	default:
		panic(fmt.Sprintf("serve flag %s: field of type %T", f.name, p)) // programmer error
	}
	def := f.def
	if v := os.Getenv(f.env); f.env != "" && v != "" {
		def = v
	}
	if def == "" {
		return nil
	}
	fl := fs.Lookup(f.name)
	if err := fl.Value.Set(def); err != nil {
		return fmt.Errorf("%s=%q is not %s: fix or unset it", f.env, def, kind)
	}
	fl.DefValue = fl.Value.String()
	return nil
}

// int32Value is a flag's int32 field.
type int32Value struct{ p *int32 }

func (v int32Value) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v.p), 10)
}

func (v int32Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return errors.New("give a whole number up to 2147483647")
	}
	*v.p = int32(n)
	return nil
}

// listValue is a flag's []string field, given comma-separated; empty
// items are dropped.
type listValue struct{ p *[]string }

func (v listValue) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v listValue) Set(s string) error {
	*v.p = splitList(s)
	return nil
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
