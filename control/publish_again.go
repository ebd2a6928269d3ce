package control

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// A publish of an event id that is already in the log is answered from
// the log: the same payload gets the original answer (a duplicate), with
// what it quoted of its payload opened, or erased.

// republish answers a publish whose event stream already exists: the same
// payload gets the original answer, another payload is a conflict. What
// the original quoted of its payload (its schema violation, its filters'
// errors) is opened from its seal, or reads erased.
func (s *Server) republish(ctx context.Context, stream string, published *hooklinev1.EventPublished) (*controlv1.PublishResponse, error) {
	recs, err := s.cfg.Log.ReadStream(ctx, stream, events.Forwards, 0, 1+maxChunks)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	resp := &controlv1.PublishResponse{EventId: published.GetEventId(), Duplicate: true}
	for i := range recs {
		msg, err := events.Decode(&recs[i])
		if err != nil {
			return nil, err
		}
		switch m := msg.(type) {
		case *hooklinev1.EventPublished:
			if !bytes.Equal(m.GetPayloadSha256(), published.GetPayloadSha256()) {
				return nil, status.Errorf(codes.AlreadyExists,
					"event_id %q was already published with another payload (sha256 %s, this one %s); an event id names one fact: use a new event_id for a new fact",
					published.GetEventId(), hex.EncodeToString(m.GetPayloadSha256())[:16], hex.EncodeToString(published.GetPayloadSha256())[:16])
			}
			resp.TraceId = traceID(m)
			resp.Erased = s.cfg.Payloads.Erased(m.GetTenantId(), m.GetPayloadSeal().GetDataKeyId())
			if resp.SchemaViolation, err = s.openViolation(ctx, m); errors.Is(err, seal.ErrErased) {
				resp.Erased, resp.SchemaViolation = true, m.GetSchemaViolation() // made value-free below
			} else if err != nil {
				return nil, fmt.Errorf("read %s: %w", stream, err)
			}
		case *hooklinev1.DeliveriesPlanned:
			filtered, erased, err := s.cfg.Payloads.OpenFiltered(ctx, m.GetTenantId(), m.GetEventId(), m.GetFiltered())
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", stream, err)
			}
			resp.Deliveries = append(resp.Deliveries, m.GetDeliveries()...)
			resp.Filtered = append(resp.Filtered, filtered...)
			resp.Erased = resp.Erased || erased
		}
	}
	if resp.Erased {
		return erasedAnswer(resp), nil
	}
	return resp, nil
}

// openViolation returns a published event's schema violation with what it
// quotes of the payload opened from its seal; ErrErased when erased.
func (s *Server) openViolation(ctx context.Context, m *hooklinev1.EventPublished) (*hooklinev1.SchemaViolation, error) {
	if m.GetSchemaViolation().GetSealed() == nil {
		return m.GetSchemaViolation(), nil
	}
	opened, err := s.cfg.Payloads.OpenEvent(ctx, m)
	if err != nil {
		return nil, err
	}
	return opened.GetSchemaViolation(), nil
}

// erasedAnswer marks a publish answer erased, and puts erased in the place
// of everything in it that quotes the payload: after an erasure no answer
// shows a value of it.
func erasedAnswer(resp *controlv1.PublishResponse) *controlv1.PublishResponse {
	resp.Erased = true
	resp.SchemaViolation = seal.ErasedViolation(resp.GetSchemaViolation())
	for i, f := range resp.GetFiltered() {
		if f.GetError() != "" || f.GetSealedError() != nil {
			resp.Filtered[i] = &hooklinev1.FilteredEndpoint{EndpointId: f.GetEndpointId(), ConfigVersion: f.GetConfigVersion(), Error: seal.ErasedText}
		}
	}
	return resp
}
