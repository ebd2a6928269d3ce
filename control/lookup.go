package control

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// maxLookup bounds the event ids of one LookupEvents.
const maxLookup = 1000

// lookupReads bounds the event streams one LookupEvents reads at once.
const lookupReads = 8

// LookupEvents answers which of the event ids the tenant published, from
// the first event of each one's event stream: the log itself, which is
// what was durably accepted, not a projection that may lag. It writes
// nothing. The outbox reconciler (client/outbox/relay) is its caller.
func (s *Server) LookupEvents(ctx context.Context, req *controlv1.LookupEventsRequest) (*controlv1.LookupEventsResponse, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	ids := req.GetEventIds()
	if n := len(ids); n == 0 || n > maxLookup {
		return nil, toStatus(invalid("event_ids", "has %d ids; send 1 to %d per call", n, maxLookup))
	}
	for i, id := range ids {
		if err := checkEventID(id); err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return nil, toStatus(invalid(fmt.Sprintf("event_ids[%d]", i), "%s", fe.msg))
			}
			return nil, toStatus(err)
		}
	}
	found := make([]*controlv1.AcceptedEvent, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookupReads)
	for i, id := range ids {
		g.Go(func() error {
			ev, err := s.accepted(gctx, tenantID, id)
			found[i] = ev
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, toStatus(err)
	}
	resp := &controlv1.LookupEventsResponse{}
	for i, ev := range found {
		if ev == nil {
			resp.Missing = append(resp.Missing, ids[i])
			continue
		}
		resp.Found = append(resp.Found, ev)
	}
	return resp, nil
}

// accepted reads the EventPublished of one event; nil when there is none.
func (s *Server) accepted(ctx context.Context, tenantID, eventID string) (*controlv1.AcceptedEvent, error) {
	stream := events.EventStream(tenantID, eventID)
	recs, err := s.cfg.Log.ReadStream(ctx, stream, events.Forwards, 0, 1)
	if errors.Is(err, events.ErrStreamNotFound) || (err == nil && len(recs) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	msg, err := events.Decode(&recs[0])
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", stream, err)
	}
	p, ok := msg.(*hooklinev1.EventPublished)
	if !ok {
		return nil, fmt.Errorf("read %s: first event is %s, not EventPublished", stream, recs[0].Type)
	}
	return &controlv1.AcceptedEvent{
		EventId:       p.GetEventId(),
		Type:          p.GetEventType(),
		PayloadSha256: p.GetPayloadSha256(),
		AcceptedAt:    p.GetAt(),
	}, nil
}
