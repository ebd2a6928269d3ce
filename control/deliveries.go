package control

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// ListDeliveries searches the tenant's deliveries, newest first, from the
// history projection.
func (s *Server) ListDeliveries(ctx context.Context, req *controlv1.ListDeliveriesRequest) (*controlv1.ListDeliveriesResponse, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if err := checkPage("page_size", req.GetPageSize(), history.MaxLimit, history.DefaultLimit); err != nil {
		return nil, toStatus(err)
	}
	if s.cfg.History == nil {
		return nil, status.Error(codes.Unavailable, "delivery history is not served by this node")
	}
	q := history.Query{TenantID: tenantID, EndpointID: req.GetEndpointId(), EventType: req.GetEventType(), Limit: int(req.GetPageSize()), Cursor: req.GetCursor()}
	switch req.GetStatus() {
	case "":
	case "pending":
		q.Status = history.Pending
	case "succeeded":
		q.Status = history.Succeeded
	case "failed":
		q.Status = history.Failed
	default:
		return nil, toStatus(invalid("status", "%q is not a status; use pending, succeeded or failed", req.GetStatus()))
	}
	if t := req.GetSince(); t != nil {
		q.Since = t.AsTime()
	}
	if t := req.GetUntil(); t != nil {
		q.Until = t.AsTime()
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return nil, toStatus(invalid("since", "must be before until"))
	}
	page, err := s.cfg.History.Search(ctx, q)
	switch {
	case errors.Is(err, history.ErrBadCursor):
		return nil, toStatus(invalid("cursor", "is not a cursor of this search; pass next_cursor from the previous page unchanged, with the same filters"))
	case errors.Is(err, history.ErrBadQuery):
		return nil, toStatus(invalid("query", "%v", err))
	case err != nil:
		return nil, toStatus(err)
	}
	out := &controlv1.ListDeliveriesResponse{NextCursor: page.Next}
	for _, d := range page.Deliveries {
		out.Deliveries = append(out.Deliveries, deliveryView(d, nil))
	}
	if req.GetWithWaits() {
		s.fillWaits(ctx, tenantID, out.Deliveries)
	}
	return out, nil
}

// GetDelivery returns one delivery with all its attempts.
func (s *Server) GetDelivery(ctx context.Context, req *controlv1.GetDeliveryRequest) (*controlv1.Delivery, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	d, attempts, err := s.delivery(ctx, tenantID, req.GetDeliveryId(), events.Start)
	if err != nil {
		return nil, err
	}
	v := deliveryView(d, attempts)
	s.fillWaits(ctx, tenantID, []*controlv1.Delivery{v})
	return v, toStatus(s.openResponses(ctx, v))
}

// delivery reads a delivery with its attempts, from whichever node serves
// its partition, as of at least the log position atLeast.
func (s *Server) delivery(ctx context.Context, tenantID, deliveryID string, atLeast events.Position) (history.Delivery, []history.Attempt, error) {
	if s.cfg.History == nil {
		return history.Delivery{}, nil, status.Error(codes.Unavailable, "delivery history is not served by this node")
	}
	if deliveryID == "" {
		return history.Delivery{}, nil, toStatus(invalid("delivery_id", "is required"))
	}
	d, attempts, ok, err := s.cfg.History.Get(ctx, tenantID, deliveryID, atLeast)
	if err != nil {
		return d, nil, toStatus(err)
	}
	if !ok {
		return d, nil, status.Errorf(codes.NotFound, "delivery_id %q: no such delivery for this tenant (history keeps 30 days)", deliveryID)
	}
	return d, attempts, nil
}

// ReplayDelivery asks the endpoint's grain for one manual attempt on the
// same delivery id.
func (s *Server) ReplayDelivery(ctx context.Context, req *controlv1.ReplayDeliveryRequest) (*controlv1.Delivery, error) {
	tenantID, c, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	d, _, err := s.delivery(ctx, tenantID, req.GetDeliveryId(), events.Start)
	if err != nil {
		return nil, err
	}
	r := &controlv1.ReplayDeliveryRequest{TenantId: tenantID, DeliveryId: d.ID}
	reply, err := s.askEndpoint(ctx, tenantID, d.EndpointID, &internalv1.EndpointCommand{IssuedBy: c.Actor(), Command: &internalv1.EndpointCommand_Replay{Replay: r}})
	if err != nil {
		return nil, toStatus(err)
	}
	if reply.GetDelivery() != nil {
		return reply.GetDelivery(), nil
	}
	// Read the delivery as it is after the replay's event, from the node
	// that serves its partition.
	head, err := s.cfg.Log.Head(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	d, attempts, err := s.delivery(ctx, tenantID, d.ID, head)
	if err != nil {
		return nil, err
	}
	return deliveryView(d, attempts), nil
}

// RecoverEndpoint starts a background replay of the endpoint's deliveries
// planned in [since, until) that match the filter (statuses, by default
// failed; event types), with their original webhook-ids; with dry_run it
// answers the manifest (count, digest, time under the rate limit) and
// starts nothing; with a digest it replays exactly the list the dry run
// described, or refuses (FAILED_PRECONDITION naming digest).
func (s *Server) RecoverEndpoint(ctx context.Context, req *controlv1.RecoverEndpointRequest) (*controlv1.Recovery, error) {
	if req.GetSince() == nil {
		return nil, toStatus(invalid("since", "is required: the start of the range of deliveries to recover (RFC 3339)"))
	}
	until := req.GetUntil()
	if until == nil {
		until = timestamppb.New(s.cfg.Now())
	}
	if !req.GetSince().AsTime().Before(until.AsTime()) {
		return nil, toStatus(invalid("since", "must be before until"))
	}
	if until.AsTime().Sub(req.GetSince().AsTime()) > 31*24*time.Hour {
		return nil, toStatus(invalid("since", "the range is longer than the 30 days of history; narrow it"))
	}
	r := &controlv1.RecoverEndpointRequest{
		TenantId: req.GetTenantId(), EndpointId: req.GetEndpointId(), Since: req.GetSince(), Until: until,
		Statuses: req.GetStatuses(), EventTypes: req.GetEventTypes(), DryRun: req.GetDryRun(), Digest: req.GetDigest(),
	}
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_Recover{Recover: r}
	})
	return reply.GetRecovery(), err
}

// GetRecovery returns the progress of a recovery.
func (s *Server) GetRecovery(ctx context.Context, req *controlv1.GetRecoveryRequest) (*controlv1.Recovery, error) {
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_GetRecovery{GetRecovery: req}
	})
	return reply.GetRecovery(), err
}

// deliveryView is the API view of a delivery and, when given, its attempts.
func deliveryView(d history.Delivery, attempts []history.Attempt) *controlv1.Delivery {
	v := &controlv1.Delivery{
		DeliveryId:     d.ID,
		TenantId:       d.TenantID,
		EndpointId:     d.EndpointID,
		EventId:        d.EventID,
		EventType:      d.EventType,
		Status:         d.Status.String(),
		AttemptCount:   d.Attempts,
		PlannedAt:      ts(d.PlannedAt),
		NextAttemptAt:  ts(d.NextAttemptAt),
		FinishedAt:     ts(d.EndedAt),
		LastHttpStatus: d.LastHTTPStatus,
		LastError:      d.LastError,
		LastPulled:     d.LastPulled,
		OrderingKey:    d.OrderingKey,
		Sequence:       d.Sequence,
	}
	if c := d.LastErrorClass; c != hooklinev1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		v.LastErrorClass = strings.ToLower(strings.TrimPrefix(c.String(), "ERROR_CLASS_"))
	}
	if len(attempts) > 0 {
		v.Attempts = attemptsView(attempts)
	}
	return v
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
