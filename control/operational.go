package control

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/operational"
	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// operationalActor issues the operational events.
var operationalActor = &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "operational"}

// createdSkew is how much later than an operational event's cause an
// endpoint may have been created and still get it: the two times come
// from the clocks of two grains, perhaps on two nodes.
const createdSkew = time.Minute

// PublishOperational publishes one of Hookline's own events for its
// tenant (see package operational) through the publish path, planned for
// the tenant's endpoints that name its type or operational.All, other than
// the endpoint it is about, and created before its cause: an operational
// endpoint created now does not receive the incidents of the last day that
// a catching-up node emits late. With none of them it writes nothing and
// returns 0. A repeated event (same id, same bytes) is answered from its
// stream; other bytes under the same id, or an invalid event, fail with
// operational.ErrRejected.
func (s *Server) PublishOperational(ctx context.Context, ev operational.Event) (int, error) {
	if !operational.Known(ev.Type) || ev.TenantID == "" || checkEventID(ev.ID) != nil || len(ev.Payload) == 0 {
		return 0, fmt.Errorf("%w: %s %q of tenant %q", operational.ErrRejected, ev.Type, ev.ID, ev.TenantID)
	}
	refs, err := s.operationalRefs(ev)
	if err != nil || len(refs) == 0 {
		return 0, err
	}
	sum := sha256.Sum256(ev.Payload)
	published := &hooklinev1.EventPublished{
		TenantId:      ev.TenantID,
		EventId:       ev.ID,
		EventType:     ev.Type,
		ObjectId:      ev.EndpointID,
		OccurredAt:    timestamppb.New(ev.OccurredAt),
		Payload:       ev.Payload,
		PayloadSha256: sum[:],
		ContentType:   "application/json",
		IssuedBy:      operationalActor,
		At:            timestamppb.New(s.cfg.Now()),
	}
	resp, err := s.record(ctx, published, refs)
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.AlreadyExists {
			return 0, fmt.Errorf("%w: %v", operational.ErrRejected, err)
		}
		return 0, err
	}
	if !resp.GetDuplicate() {
		s.cfg.Logger.Info("operational event published", slog.String("tenant_id", ev.TenantID), slog.String("event_id", ev.ID),
			slog.String("event_type", ev.Type), slog.String("endpoint_id", ev.EndpointID), slog.Int("deliveries", len(resp.GetDeliveries())))
	}
	return len(resp.GetDeliveries()), nil
}

// operationalRefs returns the endpoints an operational event is planned
// for, by id.
func (s *Server) operationalRefs(ev operational.Event) ([]registry.EndpointRef, error) {
	var refs []registry.EndpointRef
	for _, t := range []string{ev.Type, operational.All} {
		r, err := s.cfg.Registry.EndpointsNaming(ev.TenantID, t)
		if err != nil {
			return nil, err
		}
		refs = append(refs, r...)
	}
	slices.SortFunc(refs, func(a, b registry.EndpointRef) int { return strings.Compare(a.ID, b.ID) })
	refs = slices.CompactFunc(refs, func(a, b registry.EndpointRef) bool { return a.ID == b.ID })
	out := refs[:0]
	for _, ref := range refs {
		if ref.ID == ev.EndpointID {
			continue
		}
		e, ok, err := s.cfg.Registry.Endpoint(ref.ID)
		if err != nil {
			return nil, err
		}
		if !ok || e.CreatedAt.After(ev.OccurredAt.Add(createdSkew)) {
			continue
		}
		out = append(out, ref)
	}
	return out, nil
}

// ListOperationalEventTypes lists Hookline's operational event types, with
// an example payload of each.
func (s *Server) ListOperationalEventTypes(ctx context.Context, _ *controlv1.ListOperationalEventTypesRequest) (*controlv1.ListOperationalEventTypesResponse, error) {
	if _, ok := CallerFrom(ctx); !ok {
		return nil, status.Error(codes.Unauthenticated, "missing credentials")
	}
	out := &controlv1.ListOperationalEventTypesResponse{}
	for _, t := range operational.Types() {
		out.Types = append(out.Types, &controlv1.OperationalEventType{Type: t.Name, Description: t.Description, Example: string(t.Example)})
	}
	return out, nil
}
