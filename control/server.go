package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/filter"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// Grains sends a message to a grain and waits for its answer. An error
// that wraps [ErrUnavailable] answers UNAVAILABLE, and the caller may retry.
type Grains interface {
	Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error)
}

// Projections lets a command's effects become visible before the command
// answers (read-your-writes): WaitFor returns once the local projections
// have applied the log up to pos.
type Projections interface {
	WaitFor(ctx context.Context, pos events.Position) error
}

// History answers delivery queries across the cluster: each node keeps the
// history of its own partitions. The node's history service satisfies it.
type History interface {
	// Search returns a page of a tenant's deliveries; cursors are valid on
	// every node.
	Search(ctx context.Context, q history.Query) (history.Page, error)
	// Get returns a delivery and its attempts as of at least the log
	// position atLeast (read-your-writes); ok is false when there is none.
	Get(ctx context.Context, tenantID, deliveryID string, atLeast events.Position) (d history.Delivery, attempts []history.Attempt, ok bool, err error)
}

// HandOver takes the plan of each new publish at once, before the
// projections apply it: the node hands the deliveries to the endpoint
// grains of their partitions' owners (actors/endpoint's Planned).
// *node.Server satisfies it.
type HandOver interface {
	// HandOver is called with the event, its whole plan in one message (as
	// the plan's chunks hold it: the same times) and the position of the
	// append. It must not block.
	HandOver(published *hooklinev1.EventPublished, plan *hooklinev1.DeliveriesPlanned, at events.Position)
}

// PlanFault alters the deliveries a publish planned before they are
// recorded: the fault switch's plan-short (*faults.Set satisfies it).
type PlanFault interface {
	ShortPlan(planned []*hooklinev1.PlannedDelivery) []*hooklinev1.PlannedDelivery
}

// Config configures the control API. Log, Grains, Registry and Projections
// are required; the zero value of the rest means the documented defaults.
type Config struct {
	Log         events.Log
	Grains      Grains
	Registry    *registry.Registry
	Projections Projections
	// History answers delivery searches; nil makes them UNAVAILABLE.
	History History
	// Reconciler runs reconcile for the admin; nil makes it UNIMPLEMENTED.
	Reconciler Reconciler
	// AdminToken authenticates operators; empty disables the admin API.
	AdminToken string
	// Portal finds portal tokens; nil refuses them.
	Portal PortalTokens
	// Cluster reports every member's figures; nil makes GetClusterStatus
	// UNAVAILABLE.
	Cluster Cluster
	// AuditLink, if set, returns the address of a stream in the log's own
	// UI (EventStoreDB), and AuditUI names that UI ("eventstoredb").
	AuditLink func(stream string) string
	AuditUI   string
	// LogRetention is the log's retention, which a tenant's may only be
	// shorter than; 0 means 30 days.
	LogRetention time.Duration
	// Archive, when set, answers reads of events the log no longer
	// holds (past retention); nil: those are not found.
	Archive events.StreamArchive
	// Payloads seals the tenants' payloads under their data keys before
	// they are appended, opens them for reads, and erases them; nil
	// leaves payloads in clear (a store without a vault).
	Payloads *seal.Payloads
	// Keyring is the node's master keyring, which ResealSecrets reseals
	// under; nil makes ResealSecrets FAILED_PRECONDITION.
	Keyring *seal.Keyring
	// MaxPayload caps an event's payload; default 256 KiB.
	MaxPayload int
	// MaxBatch caps the events of one PublishBatch; default 100.
	MaxBatch int
	// MaxPlanned caps the endpoints one publish may plan a delivery for
	// (filtered out ones included): a publish whose type reaches more of
	// its tenant's endpoints is refused with FAILED_PRECONDITION, so that
	// no publish makes one huge append that every tenant's work waits
	// behind. Default [DefaultMaxPlanned].
	MaxPlanned int
	// DeliveryDeadline ends automatic retries of a delivery; default 24 h.
	DeliveryDeadline time.Duration
	// MaxInFlight bounds the calls served at once, over gRPC and over REST
	// each; a call over it is refused with UNAVAILABLE (503). Default
	// [DefaultMaxInFlight].
	MaxInFlight int
	// MaxInFlightPerCaller bounds the calls of one tenant (all its keys)
	// or of the admin served at once; a call over it is refused with
	// RESOURCE_EXHAUSTED (429). Default [DefaultMaxInFlightPerCaller].
	MaxInFlightPerCaller int
	// MaxBodyBytesInFlight bounds the REST request bodies held at once, in
	// bytes; a request that would pass it is refused with UNAVAILABLE
	// (503). Default [DefaultMaxBodyBytesInFlight].
	MaxBodyBytesInFlight int64
	// MaxMessage is the largest gRPC request message, in bytes. Default
	// [DefaultMaxMessage]; the REST bodies' caps follow from it and from
	// MaxPayload.
	MaxMessage int
	// HandOver, if set, is given each new publish that planned deliveries;
	// nil hands over nothing (the grains learn of the plan from the due
	// index).
	HandOver HandOver
	// Spans, if set, exports each new publish as a span of its trace (the
	// node's OTLP exporter); nil exports nothing.
	Spans Spans
	// PlanFault, if set, alters each publish's plan before it is recorded
	// (the fault switch's plan-short); nil records the plan as routed.
	PlanFault PlanFault
	// ServedElsewhere, if set, reports whether another member of the
	// cluster is ready to serve calls: one that comes before this node is
	// ready is then refused at once with UNAVAILABLE, to be retried there,
	// instead of waiting for this node's catch-up. nil means calls wait
	// (see Ready).
	ServedElsewhere func() bool
	Now             func() time.Time
	Logger          *slog.Logger
}

// Validate reports the first missing or invalid setting.
func (c *Config) Validate() error {
	switch {
	case c.Log == nil:
		return errors.New("control: Config.Log is nil: pass the node's event log")
	case c.Grains == nil:
		return errors.New("control: Config.Grains is nil: pass the cluster node")
	case c.Registry == nil:
		return errors.New("control: Config.Registry is nil: pass the registry projection")
	case c.Projections == nil:
		return errors.New("control: Config.Projections is nil: pass the projection runner")
	case c.MaxPayload < 0, c.MaxBatch < 0, c.MaxPlanned < 0, c.DeliveryDeadline < 0:
		return errors.New("control: MaxPayload, MaxBatch, MaxPlanned and DeliveryDeadline must not be negative")
	case c.MaxInFlight < 0, c.MaxInFlightPerCaller < 0, c.MaxBodyBytesInFlight < 0, c.MaxMessage < 0:
		return errors.New("control: MaxInFlight, MaxInFlightPerCaller, MaxBodyBytesInFlight and MaxMessage must not be negative (zero means the default)")
	}
	return nil
}

func (c *Config) defaults() {
	c.MaxPayload = cmp.Or(c.MaxPayload, 256<<10)
	c.LogRetention = cmp.Or(c.LogRetention, 30*24*time.Hour)
	c.MaxBatch = cmp.Or(c.MaxBatch, 100)
	c.MaxPlanned = cmp.Or(c.MaxPlanned, DefaultMaxPlanned)
	c.DeliveryDeadline = cmp.Or(c.DeliveryDeadline, 24*time.Hour)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.MaxInFlightPerCaller = cmp.Or(c.MaxInFlightPerCaller, DefaultMaxInFlightPerCaller)
	c.MaxBodyBytesInFlight = cmp.Or(c.MaxBodyBytesInFlight, DefaultMaxBodyBytesInFlight)
	c.MaxMessage = cmp.Or(c.MaxMessage, DefaultMaxMessage)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
}

// Server implements the control API's gRPC services. It is safe for
// concurrent use.
type Server struct {
	controlv1.UnimplementedTenantServiceServer
	controlv1.UnimplementedEndpointServiceServer
	controlv1.UnimplementedEventServiceServer
	controlv1.UnimplementedDeliveryServiceServer
	controlv1.UnimplementedPortalServiceServer
	controlv1.UnimplementedOperatorServiceServer
	controlv1.UnimplementedAuditServiceServer
	controlv1.UnimplementedEndpointHealthServiceServer
	controlv1.UnimplementedReconcileServiceServer
	controlv1.UnimplementedEventTypeServiceServer

	cfg    Config
	health *health.Server
	// ready is closed once the node's projections have applied the log as
	// it was at the node's start (Ready).
	ready     chan struct{}
	readyOnce sync.Once
	waiting   atomic.Int32 // calls waiting for ready
	// filters are the endpoints' compiled filters, by config version.
	filters filter.Cache
	// grpcLimits and restLimits bound the calls in flight on each side.
	// A REST call reaches gRPC through the gateway and counts on both.
	grpcLimits, restLimits *limiter
	schemaCounts           schemaCounts
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	return &Server{
		cfg: cfg, health: health.NewServer(), ready: make(chan struct{}),
		grpcLimits: newLimiter(cfg.MaxInFlight, cfg.MaxInFlightPerCaller, 0),
		restLimits: newLimiter(cfg.MaxInFlight, cfg.MaxInFlightPerCaller, cfg.MaxBodyBytesInFlight),
	}, nil
}

// NewGRPCServer returns a gRPC server with the control services, health and
// reflection registered. Every call but health checks is authenticated
// and admitted under the limits from its headers, before its message is
// read (see tap); messages are capped at Config.MaxMessage, a connection
// serves at most 128 calls at once, and its TLS handshake (opts may carry
// credentials) must end within 10 s.
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts,
		grpc.InTapHandle(s.tap),
		grpc.ChainUnaryInterceptor(s.authenticate),
		grpc.ChainStreamInterceptor(s.authenticateStream),
		grpc.MaxRecvMsgSize(s.cfg.MaxMessage),
		grpc.MaxConcurrentStreams(128),
		grpc.ConnectionTimeout(10*time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
	)
	g := grpc.NewServer(opts...)
	controlv1.RegisterTenantServiceServer(g, s)
	controlv1.RegisterEndpointServiceServer(g, s)
	controlv1.RegisterEventServiceServer(g, s)
	controlv1.RegisterEventTypeServiceServer(g, s)
	controlv1.RegisterDeliveryServiceServer(g, s)
	controlv1.RegisterPortalServiceServer(g, s)
	controlv1.RegisterOperatorServiceServer(g, s)
	controlv1.RegisterAuditServiceServer(g, s)
	controlv1.RegisterEndpointHealthServiceServer(g, s)
	controlv1.RegisterReconcileServiceServer(g, s)
	grpc_health_v1.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	s.health.SetServingStatus("", grpc_health_v1.HealthCheckResponse_NOT_SERVING) // until Ready
	return g
}

// Shutdown marks the services not serving, so health checks fail first.
func (s *Server) Shutdown() { s.health.Shutdown() }

// settle waits until the local projections have applied everything written
// so far, so that the caller's next read sees its own command.
func (s *Server) settle(ctx context.Context) error {
	head, err := s.cfg.Log.Head(ctx)
	if err != nil {
		return fmt.Errorf("read log head: %w", err)
	}
	return s.cfg.Projections.WaitFor(ctx, head)
}
