package control

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/internal/pause"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Pull delivery: a pull endpoint's consumer leases its due deliveries,
// acknowledges them, and seeks back. The endpoint's grain holds the
// leases (see actors/endpoint's command_pull.go).

// maxPullWait bounds wait_seconds, and pullPoll is how often a waiting
// pull asks the grain again.
const (
	maxPullWait = 20
	pullPoll    = 200 * time.Millisecond
)

// PullDeliveries leases due deliveries of a pull endpoint; with
// wait_seconds it asks again until some are due or the wait ends.
func (s *Server) PullDeliveries(ctx context.Context, req *controlv1.PullDeliveriesRequest) (*controlv1.PullDeliveriesResponse, error) {
	if err := pullScope(ctx, req.GetEndpointId()); err != nil {
		return nil, err
	}
	if w := req.GetWaitSeconds(); w < 0 || w > maxPullWait {
		return nil, toStatus(invalid("wait_seconds", "is %d; use 0 to %d", w, maxPullWait))
	}
	if err := checkPage("max", req.GetMax(), endpoint.MaxPullMax, endpoint.DefaultPullMax); err != nil {
		return nil, toStatus(err)
	}
	// The wait is the caller's, in real time whatever the node's clock.
	deadline := time.Now().Add(time.Duration(req.GetWaitSeconds()) * time.Second)
	r := proto.CloneOf(req)
	r.WaitSeconds = 0
	for {
		reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
			c.Command = &internalv1.EndpointCommand_Pull{Pull: r}
		})
		if err != nil {
			return nil, err
		}
		out := reply.GetPulled()
		if out == nil {
			out = &controlv1.PullDeliveriesResponse{}
		}
		if len(out.GetMessages()) > 0 || !time.Now().Before(deadline) {
			return out, nil
		}
		if err := pause.For(ctx, min(pullPoll, time.Until(deadline))); err != nil {
			return out, nil // the caller went away
		}
	}
}

// AckDeliveries settles leased deliveries as acknowledged.
func (s *Server) AckDeliveries(ctx context.Context, req *controlv1.AckDeliveriesRequest) (*controlv1.AckDeliveriesResponse, error) {
	if err := pullScope(ctx, req.GetEndpointId()); err != nil {
		return nil, err
	}
	r := proto.CloneOf(req)
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_Ack{Ack: r}
	})
	return reply.GetAcked(), err
}

// SeekDeliveries offers again the endpoint's deliveries planned since a
// time: a recovery of every ended status over [since, now); those still
// pending are offered anyway.
func (s *Server) SeekDeliveries(ctx context.Context, req *controlv1.SeekDeliveriesRequest) (*controlv1.Recovery, error) {
	if err := pullScope(ctx, req.GetEndpointId()); err != nil {
		return nil, err
	}
	if req.GetSince() == nil {
		return nil, toStatus(invalid("since", "is required: the time (RFC 3339) from which to offer the deliveries again"))
	}
	return s.RecoverEndpoint(ctx, &controlv1.RecoverEndpointRequest{
		TenantId: req.GetTenantId(), EndpointId: req.GetEndpointId(), Since: req.GetSince(),
		Statuses: []string{"succeeded", "failed"},
	})
}
