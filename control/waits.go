package control

import (
	"context"
	"log/slog"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// maxWaitAsks bounds the endpoint grains one fillWaits asks at once.
const maxWaitAsks = 8

// fillWaits sets the wait of each pending delivery of ds (Delivery.wait):
// one question to each of their endpoints' grains, which know what holds
// them (a limit, the breaker, a lease, the ordering key's head). A grain
// that does not answer leaves its deliveries' waits to their schedule, as
// the history has it: a list never fails for want of a wait.
func (s *Server) fillWaits(ctx context.Context, tenantID string, ds []*controlv1.Delivery) {
	byEndpoint := map[string][]*controlv1.Delivery{}
	for _, d := range ds {
		if d.GetStatus() == "pending" {
			byEndpoint[d.GetEndpointId()] = append(byEndpoint[d.GetEndpointId()], d)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxWaitAsks)
	for ep, list := range byEndpoint {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			q := &internalv1.ListWaits{}
			for _, d := range list {
				q.Deliveries = append(q.Deliveries, &internalv1.WaitQuery{DeliveryId: d.GetDeliveryId(), OrderingKey: d.GetOrderingKey(), NextAttemptAt: d.GetNextAttemptAt()})
			}
			reply, err := s.askEndpoint(ctx, tenantID, ep, &internalv1.EndpointCommand{Command: &internalv1.EndpointCommand_ListWaits{ListWaits: q}})
			if err != nil {
				s.cfg.Logger.Debug("no waits from an endpoint grain", slog.String("endpoint_id", ep), slog.String("error", err.Error()))
			}
			for _, d := range list { // each goroutine sets its own endpoint's deliveries
				d.Wait = reply.GetWaits()[d.GetDeliveryId()]
				if d.Wait == nil {
					d.Wait = s.scheduledWait(d)
				}
			}
		})
	}
	wg.Wait()
}

// scheduledWait is a pending delivery's wait as the history has it: its
// next attempt later, or due now.
func (s *Server) scheduledWait(d *controlv1.Delivery) *controlv1.DeliveryWait {
	if t := d.GetNextAttemptAt(); t != nil && t.AsTime().After(s.cfg.Now()) {
		return &controlv1.DeliveryWait{Reason: "backoff", Until: timestamppb.New(t.AsTime()), Detail: "its next attempt is scheduled"}
	}
	return &controlv1.DeliveryWait{Reason: "due", Detail: "due: its endpoint attempts it shortly"}
}
