package control

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Endpoint health is summarised from the delivery history of the last day,
// by hour, reading at most healthMaxDeliveries (the most recent).
const (
	healthWindow        = 24 * time.Hour
	healthMaxDeliveries = 5000
)

// GetEndpointHealth summarises an endpoint's last 24 hours by hour: its
// deliveries' outcomes, their time from planning to success, and its
// circuit and status now.
func (s *Server) GetEndpointHealth(ctx context.Context, req *controlv1.GetEndpointHealthRequest) (*controlv1.EndpointHealth, error) {
	// The endpoint's grain answers for its tenant only (NOT_FOUND
	// otherwise), so a tenant never reads another's health.
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_Get{Get: &controlv1.GetEndpointRequest{TenantId: req.GetTenantId(), EndpointId: req.GetEndpointId()}}
	})
	if err != nil {
		return nil, err
	}
	ep := reply.GetEndpoint()
	if s.cfg.History == nil {
		return nil, status.Error(codes.Unavailable, "delivery history is not served by this node")
	}
	now := s.cfg.Now()
	start := now.Add(-healthWindow).Truncate(time.Hour)
	out := &controlv1.EndpointHealth{
		EndpointId: ep.GetEndpointId(), Circuit: ep.GetCircuit(), Status: ep.GetStatus(), Since: timestamppb.New(start),
	}
	buckets := make([]*controlv1.HealthBucket, 0, 25)
	lat := make([][]int64, 0, 25)
	for t := start; !t.After(now); t = t.Add(time.Hour) {
		buckets = append(buckets, &controlv1.HealthBucket{Start: timestamppb.New(t)})
		lat = append(lat, nil)
	}
	q := history.Query{TenantID: ep.GetTenantId(), EndpointID: ep.GetEndpointId(), Since: start, Limit: history.MaxLimit}
	read := 0
	for {
		page, err := s.cfg.History.Search(ctx, q)
		if err != nil {
			return nil, toStatus(err)
		}
		for _, d := range page.Deliveries {
			i := int(d.PlannedAt.Sub(start) / time.Hour)
			if i < 0 || i >= len(buckets) {
				continue
			}
			b := buckets[i]
			switch d.Status {
			case history.Succeeded:
				b.Succeeded++
				out.Succeeded++
				if !d.EndedAt.IsZero() {
					lat[i] = append(lat[i], d.EndedAt.Sub(d.PlannedAt).Milliseconds())
				}
			case history.Failed:
				b.Failed++
				out.Failed++
			default:
				b.Pending++
				out.Pending++
			}
		}
		read += len(page.Deliveries)
		if page.Next == "" {
			break
		}
		if read >= healthMaxDeliveries {
			out.Sampled = true
			break
		}
		q.Cursor = page.Next
	}
	for i, b := range buckets {
		if l := lat[i]; len(l) > 0 {
			slices.Sort(l)
			b.P50Ms, b.MaxMs = l[len(l)/2], l[len(l)-1]
		}
	}
	out.Buckets = buckets
	if n := out.Succeeded + out.Failed; n > 0 {
		out.SuccessRate = float64(out.Succeeded) / float64(n)
	}
	if ep.GetSettings().GetOrdering() == "key" {
		keys, err := s.ListOrderingKeys(ctx, &controlv1.ListOrderingKeysRequest{TenantId: req.GetTenantId(), EndpointId: req.GetEndpointId(), PageSize: 1000})
		if err != nil {
			return nil, err
		}
		out.BlockedKeys = int32(len(keys.GetKeys()))
		for _, k := range keys.GetKeys() {
			out.OldestBlockedSeconds = max(out.OldestBlockedSeconds, k.GetWaitedSeconds())
		}
	}
	return out, nil
}
