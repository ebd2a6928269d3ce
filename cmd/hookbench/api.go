package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// callTimeout bounds one control API call.
const callTimeout = 30 * time.Second

// API is a client of one node's control API with the admin token, acting
// for tenants by naming them. Reconnect points it at a restarted node.
// It is safe for concurrent use.
type API struct {
	token string

	mu   sync.RWMutex // guards cc and gen
	cc   *grpc.ClientConn
	gen  int           // counts connections, so callers see a restart
	next chan struct{} // closed by Reconnect
}

// Dial connects to addr (gRPC, plaintext on loopback).
func Dial(addr, token string) (*API, error) {
	a := &API{token: token, next: make(chan struct{})}
	if err := a.Reconnect(addr); err != nil {
		return nil, err
	}
	return a, nil
}

// Reconnect closes the current connection and dials addr.
func (a *API) Reconnect(addr string) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial node %s: %w", addr, err)
	}
	a.mu.Lock()
	old := a.cc
	a.cc, a.gen = cc, a.gen+1
	close(a.next)
	a.next = make(chan struct{})
	a.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// readyPoll is how often WaitServing asks a starting node's health again.
const readyPoll = 20 * time.Millisecond

// WaitServing waits until the node at addr says it is serving (its gRPC
// health check: the node answers calls only once its projections caught
// up with the log, and holds the calls that come before), or ctx ends. A
// load balancer with a readiness probe sends a restarted node no traffic
// before; a client that calls it at once has its calls held and answered
// together, a burst of publishes that is the client's, not the cluster's.
func WaitServing(ctx context.Context, addr string) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial node %s: %w", addr, err)
	}
	defer cc.Close()
	health := grpc_health_v1.NewHealthClient(cc)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, cerr := health.Check(cctx, &grpc_health_v1.HealthCheckRequest{})
		cancel()
		if cerr == nil && resp.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING {
			return nil
		}
		if err := sleepCtx(ctx, readyPoll); err != nil {
			last := resp.GetStatus().String()
			if cerr != nil {
				last = status.Convert(cerr).Message()
			}
			return fmt.Errorf("node %s not serving: %w (its last answer: %s)", addr, err, last)
		}
	}
}

// Addr returns the address of the node the API calls.
func (a *API) Addr() string {
	cc, _, _ := a.conn()
	return cc.CanonicalTarget()
}

// Close closes the connection.
func (a *API) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cc.Close()
}

// conn returns the current connection, its generation and a channel closed
// at the next Reconnect.
func (a *API) conn() (*grpc.ClientConn, int, <-chan struct{}) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.cc, a.gen, a.next
}

func (a *API) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, callTimeout)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+a.token), cancel
}

// benchQuota lifts the tenant quota out of the way (the node's default is
// 100 attempts/s and 100 in flight per tenant): the scenarios measure the
// engine, the dispatcher and the node's slots, not a configured cap.
var benchQuota = &hooklinev1.Quota{AttemptsPerSecond: 1_000_000, MaxInFlight: 10_000}

// CreateTenant creates a tenant with the admin token and benchQuota.
func (a *API) CreateTenant(ctx context.Context, id string) error {
	cc, _, _ := a.conn()
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	_, err := controlv1.NewTenantServiceClient(cc).CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: id, Name: "hookbench " + id, Quota: benchQuota})
	if status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		return fmt.Errorf("create tenant %s: %w: give the node's HOOKLINE_ADMIN_TOKEN with --token", id, err)
	}
	if err != nil {
		return fmt.Errorf("create tenant %s: %w", id, err)
	}
	return nil
}

// CreateEndpoint registers an endpoint for a tenant and returns its id (the
// name scoped to the tenant) and its secret.
func (a *API) CreateEndpoint(ctx context.Context, tenant, name string, settings *controlv1.EndpointSettings) (id, secret string, err error) {
	cc, _, _ := a.conn()
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	resp, err := controlv1.NewEndpointServiceClient(cc).CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{TenantId: tenant, EndpointId: name, Settings: settings})
	if status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "url") {
		return "", "", fmt.Errorf("create endpoint %s: %w: the receiver is on loopback, so the node must run with --allow-private-targets", name, err)
	}
	if err != nil {
		return "", "", fmt.Errorf("create endpoint %s: %w", name, err)
	}
	return resp.GetEndpoint().GetEndpointId(), resp.GetSecret(), nil
}

// PublishBatch publishes events for a tenant. It fails if the call fails or
// any event fails; the answers are in the order of the events.
func (a *API) PublishBatch(ctx context.Context, tenant string, evs []*controlv1.PublishRequest) ([]*controlv1.PublishResponse, error) {
	cc, _, _ := a.conn()
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	resp, err := controlv1.NewEventServiceClient(cc).PublishBatch(ctx, &controlv1.PublishBatchRequest{TenantId: tenant, Events: evs})
	if err != nil {
		return nil, fmt.Errorf("publish %d events of %s: %w", len(evs), tenant, err)
	}
	out := make([]*controlv1.PublishResponse, len(resp.GetResults()))
	for i, r := range resp.GetResults() {
		if r.GetErrorCode() != "" {
			return nil, fmt.Errorf("publish %s: %s %s", tenant, r.GetErrorCode(), r.GetErrorMessage())
		}
		out[i] = r.GetResponse()
	}
	return out, nil
}

// CountDeliveries counts a tenant's deliveries with a status (pending,
// succeeded, failed) by paging ListDeliveries, for at most limit pages.
// complete is false when the pages ran out first.
func (a *API) CountDeliveries(ctx context.Context, tenant, st string, limit int) (n int64, complete bool, err error) {
	cc, _, _ := a.conn()
	client := controlv1.NewDeliveryServiceClient(cc)
	cursor := ""
	for range limit {
		cctx, cancel := a.ctx(ctx)
		resp, err := client.ListDeliveries(cctx, &controlv1.ListDeliveriesRequest{TenantId: tenant, Status: st, PageSize: 1000, Cursor: cursor})
		cancel()
		if err != nil {
			return n, false, fmt.Errorf("list %s deliveries of %s: %w", st, tenant, err)
		}
		n += int64(len(resp.GetDeliveries()))
		if cursor = resp.GetNextCursor(); cursor == "" {
			return n, true, nil
		}
	}
	return n, false, nil
}

// CountEndpoints counts a tenant's endpoints as the node's registry knows
// them (publish plans from the same registry).
func (a *API) CountEndpoints(ctx context.Context, tenant string) (int, error) {
	cc, _, _ := a.conn()
	client := controlv1.NewEndpointServiceClient(cc)
	n, cursor := 0, ""
	for range 100 {
		cctx, cancel := a.ctx(ctx)
		resp, err := client.ListEndpoints(cctx, &controlv1.ListEndpointsRequest{TenantId: tenant, PageSize: 500, Cursor: cursor})
		cancel()
		if err != nil {
			return n, fmt.Errorf("list endpoints of %s: %w", tenant, err)
		}
		n += len(resp.GetEndpoints())
		if cursor = resp.GetNextCursor(); cursor == "" {
			break
		}
	}
	return n, nil
}

// Search asks for the first page (10) of a tenant's deliveries, as a
// dashboard would; it returns the call's error (a gRPC status).
func (a *API) Search(ctx context.Context, tenant string) error {
	cc, _, _ := a.conn()
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	_, err := controlv1.NewDeliveryServiceClient(cc).ListDeliveries(ctx, &controlv1.ListDeliveriesRequest{TenantId: tenant, PageSize: 10})
	return err
}

// GetDelivery returns a tenant's delivery with its attempts (read from the
// log).
func (a *API) GetDelivery(ctx context.Context, tenant, id string) (*controlv1.Delivery, error) {
	cc, _, _ := a.conn()
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	d, err := controlv1.NewDeliveryServiceClient(cc).GetDelivery(ctx, &controlv1.GetDeliveryRequest{TenantId: tenant, DeliveryId: id})
	if err != nil {
		return nil, fmt.Errorf("get delivery %s of %s: %w", id, tenant, err)
	}
	return d, nil
}

// controlClients are the control API's clients on one connection.
type controlClients struct {
	tenants    controlv1.TenantServiceClient
	endpoints  controlv1.EndpointServiceClient
	events     controlv1.EventServiceClient
	deliveries controlv1.DeliveryServiceClient
	types      controlv1.EventTypeServiceClient
	audit      controlv1.AuditServiceClient
}

// invoke calls f with the clients of the current connection, under the
// admin token and callTimeout.
func (a *API) invoke(ctx context.Context, f func(ctx context.Context, cc *controlClients) error) error {
	cc, _, _ := a.conn()
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	return f(ctx, &controlClients{tenants: controlv1.NewTenantServiceClient(cc), endpoints: controlv1.NewEndpointServiceClient(cc),
		events: controlv1.NewEventServiceClient(cc), deliveries: controlv1.NewDeliveryServiceClient(cc),
		types: controlv1.NewEventTypeServiceClient(cc), audit: controlv1.NewAuditServiceClient(cc)})
}

// reconcileTimeout bounds one reconcile, which reads the whole log.
const reconcileTimeout = 10 * time.Minute

// Reconcile asks the node for a reconcile run with the admin token.
func (a *API) Reconcile(ctx context.Context, req *controlv1.ReconcileRequest) (*controlv1.ReconcileReport, error) {
	cc, _, _ := a.conn()
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+a.token)
	rep, err := controlv1.NewReconcileServiceClient(cc).Reconcile(ctx, req, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return rep, nil
}
