package node

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/faults"
)

// ErrNoMasterKey refuses a node on a shared log without a configured
// master key: each node would seal secrets under a development key of its
// own that the others cannot open.
var ErrNoMasterKey = errors.New("node: a node on a shared log needs the same master key as every other node: set HOOKLINE_MASTER_KEY (head -c 32 /dev/urandom | base64) or HOOKLINE_MASTER_KEY_FILE")

// ErrEmbeddedJoin refuses a multi-node cluster on the embedded log, which
// lives in one node's data directory.
var ErrEmbeddedJoin = errors.New("node: the embedded log serves one node only: to join a cluster, use a shared log (--store postgres://… or --store kurrentdb://…)")

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
	// Retention is how long the log keeps event and delivery streams
	// after their last write (embedded) or their first (PostgreSQL, by
	// time partition); 0 means 30 days. RetainEvery is how often the
	// embedded log applies it (0: hourly). Tenant and endpoint streams are
	// kept for good.
	Retention, RetainEvery time.Duration
	// Archive is a bucket URL (file:///path; s3://bucket, gs://bucket,
	// azblob://container in a build with -tags cloudarchive): what retention drops is written
	// there first, and replays and event reads reach into it for what the
	// log no longer holds. Empty: retention drops for good.
	Archive string
	// VaultKEK is where the vault's key-encryption keys live, apart from
	// the vault: file:///path (a directory of its own) or an object store
	// URL (s3://bucket, gs://bucket, azblob://container). With it, every
	// data key is wrapped under the current KEK and each erasure destroys
	// the KEK it replaces, so no copy of the vault made before an erasure
	// (a backup, PostgreSQL's WAL, a replica) opens again. Every node of a
	// cluster needs the same. Empty: data keys sealed under the master key
	// only (see docs/features/erasure.md).
	VaultKEK string
	// PlainPayloads leaves the payloads and response bodies this node
	// records in clear in the log: not erasable. It still opens what other
	// nodes sealed. For measuring what sealing costs; a store without a
	// vault (KurrentDB) is always in clear.
	PlainPayloads bool
	// MaxPlanned caps the deliveries one publish may plan (the endpoints
	// its type reaches); 0 means control.DefaultMaxPlanned (10,000).
	MaxPlanned int
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
	// Standbys is how many members besides its owner apply each delivery
	// partition's records, ready to take it over without catching up: 0
	// means 1 (the default), negative none. A cluster of n members has at
	// most n-1 standbys per partition.
	Standbys int
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

// Validate reports the first invalid setting, naming its field.
func (c Config) Validate() error {
	switch {
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return errors.New("node: TLS needs both the certificate and the key file (--tls-cert, --tls-key), or neither")
	case c.MasterKey != "" && c.MasterKeyFile != "":
		return errors.New("node: the master key is given twice (HOOKLINE_MASTER_KEY and HOOKLINE_MASTER_KEY_FILE): give it one way")
	case c.Log == nil && storeKind(c.Store) == "":
		return fmt.Errorf("node: store %q is not a log: use \"embedded\", a PostgreSQL URL (postgres://user:pass@host:5432/db) or a KurrentDB connection string (kurrentdb://host:2113?tls=false)", redact(c.Store))
	case c.Log == nil && storeKind(c.Store) == "embedded" && len(c.Cluster.Seeds) > 0:
		return ErrEmbeddedJoin
	case c.Retention < 0, c.RetainEvery < 0:
		return errors.New("node: Retention and RetainEvery must not be negative (zero means the default)")
	case c.Slots < 0, c.HTTPReadTimeout < 0, c.MaxInFlight < 0, c.MaxInFlightPerCaller < 0, c.MaxPlanned < 0, c.IdleAfter < 0:
		return errors.New("node: Slots, HTTPReadTimeout, MaxInFlight, MaxInFlightPerCaller, MaxPlanned and IdleAfter must not be negative (zero means the default)")
	}
	return nil
}

// withDefaults fills the zero fields with their documented defaults.
func (c Config) withDefaults() Config {
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.GRPCAddr == "" {
		c.GRPCAddr = "127.0.0.1:7070"
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HTTPReadTimeout == 0 {
		c.HTTPReadTimeout = defaultHTTPReadTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Cluster.Logger == nil {
		c.Cluster.Logger = c.Logger
	}
	if c.Policy == nil {
		c.Policy = &attempt.Policy{}
	}
	c.Standbys = cmp.Or(c.Standbys, 1)
	// Endpoint grains run on the owner of their delivery partition, which
	// applies that partition's records to its projections.
	c.Cluster.PartitionedKind = endpoint.Kind
	return c
}

// Timeouts and bounds of the node's listeners and stop.
const (
	// defaultHTTPReadTimeout is Config.HTTPReadTimeout's default.
	defaultHTTPReadTimeout = 30 * time.Second
	// httpWriteTimeout bounds a REST request from the end of its headers
	// to the end of its answer.
	httpWriteTimeout = 60 * time.Second
	// httpIdleTimeout closes a kept-alive connection with no request.
	httpIdleTimeout = 2 * time.Minute
	// maxConns caps the open connections of each API listener; over it,
	// new connections wait in the kernel's backlog.
	maxConns = 4096
	// drainTimeout bounds the wait for running attempts on a graceful
	// stop, and for those of a partition handed over: one attempt's
	// default timeout.
	drainTimeout = 15 * time.Second
	// leaveTimeout bounds the hand-over of every partition on a graceful
	// stop; stopTimeout the whole stop.
	leaveTimeout = 20 * time.Second
	stopTimeout  = 45 * time.Second
)
