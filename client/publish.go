package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Event is one business fact to publish.
type Event struct {
	// TenantID is the tenant to publish for: required with the admin
	// token, empty (or the key's own) with a tenant's API key.
	TenantID string
	// ID names the fact, unique per tenant: 1 to 128 characters of
	// [A-Za-z0-9._:-]. Publishing the same ID again is a no-op.
	ID string
	// Type is a dotted name such as invoice.paid.
	Type          string
	SchemaVersion string
	ObjectID      string
	ObjectVersion int64
	// OccurredAt is when the fact happened; zero means the time of
	// publishing.
	OccurredAt time.Time
	// Payload are the exact bytes to deliver and sign.
	Payload []byte
	// ContentType of Payload; empty means application/json.
	ContentType string
	// Headers are the producer's headers of the event, which endpoint
	// filters read (headers["x-region"]); they are recorded with the
	// event, not sent to receivers.
	Headers map[string]string
	// Traceparent is the producer's W3C Trace Context
	// (00-<trace id>-<span id>-<flags>), usually the span that publishes:
	// every attempt of the event's deliveries then carries a traceparent
	// of its own, a child of it in its trace, and the delivery's lineage
	// records it. Empty: the event gets a trace of its own. Tracestate
	// goes with it to the receivers. An invalid one is refused
	// (INVALID_ARGUMENT).
	Traceparent string
	Tracestate  string
	// OrderingKey names the object the event is about: an endpoint
	// ordered by key gets the deliveries of one key one at a time, in the
	// order they were published. Up to 256 printable ASCII characters.
	OrderingKey string
}

// request returns ev as a PublishRequest.
func (ev *Event) request() *controlv1.PublishRequest {
	r := &controlv1.PublishRequest{
		TenantId:      ev.TenantID,
		EventId:       ev.ID,
		Type:          ev.Type,
		SchemaVersion: ev.SchemaVersion,
		ObjectId:      ev.ObjectID,
		ObjectVersion: ev.ObjectVersion,
		Payload:       ev.Payload,
		ContentType:   ev.ContentType,
		Headers:       ev.Headers,
		Traceparent:   ev.Traceparent,
		Tracestate:    ev.Tracestate,
		OrderingKey:   ev.OrderingKey,
	}
	if !ev.OccurredAt.IsZero() {
		r.OccurredAt = timestamppb.New(ev.OccurredAt)
	}
	return r
}

// Publish publishes one event: once it returns without error, the event and
// its planned deliveries are durable. The response lists the deliveries
// planned; Duplicate says the event id had been accepted before (the answer
// is then the original plan). Retried (idempotent by event id). An id
// published before with another payload fails with [ErrConflict].
func (c *Client) Publish(ctx context.Context, ev Event) (*controlv1.PublishResponse, error) {
	return call(ctx, c, "publish", idempotent, ev.request(), c.events.Publish)
}

// Result is the outcome of one event of a PublishBatch: its response, or
// its error.
type Result struct {
	Response *controlv1.PublishResponse
	Err      error
}

// PublishBatch publishes evs and returns one Result per event, in order;
// each event succeeds or fails on its own. It sends as few requests as the
// server's limits allow (Config.MaxBatch events and Config.MaxBatchBytes
// each, one tenant per request, as the API's batches are), one after the
// other; a request the server finds too large is split in two and sent
// again. Retried (idempotent by event id), and after a refusal for the
// caller's limit of calls in flight too, whole: such a refusal is never
// taken for a size.
//
// A request refused as a whole for what it carries (INVALID_ARGUMENT,
// PERMISSION_DENIED for its tenant, ...) gives its events that error, and
// the other requests go on. A failure that would fail every request (the
// node unreachable after the retries, the token refused, ctx ended, an
// internal error) stops PublishBatch: the events of that request and of
// the ones not sent carry that error, which is also returned; so does
// [ErrLimited] once the retries are spent. Otherwise
// the error is nil, whatever the events' own results.
func (c *Client) PublishBatch(ctx context.Context, evs []Event) ([]Result, error) {
	out := make([]Result, len(evs))
	for _, idx := range c.chunks(evs) {
		if err := c.publishChunk(ctx, evs, idx, out); err != nil {
			for i := range out {
				if out[i].Response == nil && out[i].Err == nil {
					out[i].Err = err
				}
			}
			return out, err
		}
	}
	return out, nil
}

// stopsBatch reports whether a request's failure would fail the next
// requests too, so that PublishBatch stops instead of going on.
func stopsBatch(ctx context.Context, err error) bool {
	var e *Error
	if ctx.Err() != nil || !errors.As(err, &e) || errors.Is(err, ErrLimited) {
		return true // a caller over its limit is over it for the next request too
	}
	switch e.Code {
	case codes.InvalidArgument, codes.OutOfRange, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.FailedPrecondition, codes.ResourceExhausted:
		return false
	}
	return true
}

// chunks splits the indexes of evs into requests: one tenant each, in order
// of first appearance, at most MaxBatch events and MaxBatchBytes each (an
// event larger than that alone).
func (c *Client) chunks(evs []Event) [][]int {
	var tenants []string
	byTenant := map[string][]int{}
	for i := range evs {
		t := evs[i].TenantID
		if _, ok := byTenant[t]; !ok {
			tenants = append(tenants, t)
		}
		byTenant[t] = append(byTenant[t], i)
	}
	var out [][]int
	for _, t := range tenants {
		var cur []int
		size := 0
		for _, i := range byTenant[t] {
			n := proto.Size(evs[i].request()) + 8 // the field's tag and length
			if len(cur) > 0 && (len(cur) == c.cfg.MaxBatch || size+n > c.cfg.MaxBatchBytes) {
				out = append(out, cur)
				cur, size = nil, 0
			}
			cur = append(cur, i)
			size += n
		}
		if len(cur) > 0 {
			out = append(out, cur)
		}
	}
	return out
}

// publishChunk sends the events idx of evs (one tenant) as one request and
// records their results in out. A request too large for the server is
// split in two; a request refused as a whole gives its events the error.
// It returns an error only when the batch must stop (stopsBatch).
func (c *Client) publishChunk(ctx context.Context, evs []Event, idx []int, out []Result) error {
	req := &controlv1.PublishBatchRequest{TenantId: evs[idx[0]].TenantID, Events: make([]*controlv1.PublishRequest, len(idx))}
	for k, i := range idx {
		req.Events[k] = evs[i].request()
	}
	resp, err := call(ctx, c, "publish batch", idempotent, req, c.events.PublishBatch)
	if errors.Is(err, ErrTooLarge) && len(idx) > 1 {
		half := len(idx) / 2
		if err := c.publishChunk(ctx, evs, idx[:half], out); err != nil {
			return err
		}
		return c.publishChunk(ctx, evs, idx[half:], out)
	}
	if err != nil && !stopsBatch(ctx, err) {
		for _, i := range idx {
			out[i] = Result{Err: err}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if len(resp.GetResults()) != len(idx) {
		return fmt.Errorf("publish batch: %d results for %d events", len(resp.GetResults()), len(idx))
	}
	for k, i := range idx {
		r := resp.GetResults()[k]
		if e := errorOfResult("publish", r.GetErrorCode(), r.GetErrorMessage()); e != nil {
			out[i] = Result{Err: e}
			continue
		}
		out[i] = Result{Response: r.GetResponse()}
	}
	return nil
}

// ExplainRouting says, for every endpoint of the tenant, what publishing
// the event decided for it and why (planned, paused, not subscribed,
// filtered out with the values the filter saw, deleted, disabled, created
// later), from what the log recorded. Retried (it only reads).
func (c *Client) ExplainRouting(ctx context.Context, req *controlv1.ExplainRoutingRequest) (*controlv1.EventRouting, error) {
	return call(ctx, c, "explain routing", idempotent, req, c.events.ExplainRouting)
}

// LookupEvents says which of eventIDs the tenant has published: the
// accepted events (with their payload's SHA-256) and the ids missing, each
// in the order given. tenantID is required with the admin token and may be
// empty with a tenant's key. Any number of ids: they are sent 1,000 per
// request. Retried (it only reads).
func (c *Client) LookupEvents(ctx context.Context, tenantID string, eventIDs []string) (found []*controlv1.AcceptedEvent, missing []string, err error) {
	const perCall = 1000
	for lo := 0; lo < len(eventIDs); lo += perCall {
		req := &controlv1.LookupEventsRequest{TenantId: tenantID, EventIds: eventIDs[lo:min(lo+perCall, len(eventIDs))]}
		resp, err := call(ctx, c, "lookup events", idempotent, req, c.events.LookupEvents)
		if err != nil {
			return nil, nil, err
		}
		found = append(found, resp.GetFound()...)
		missing = append(missing, resp.GetMissing()...)
	}
	return found, missing, nil
}

// ListOperationalEventTypes lists Hookline's own event types about a
// tenant's account (hookline.endpoint.paused, hookline.circuit.opened, …)
// with a description and an example payload of each: an endpoint receives
// them by naming them (or "hookline.*") in its event types. Retried (it
// only reads).
func (c *Client) ListOperationalEventTypes(ctx context.Context) ([]*controlv1.OperationalEventType, error) {
	resp, err := call(ctx, c, "list operational event types", idempotent, &controlv1.ListOperationalEventTypesRequest{}, c.events.ListOperationalEventTypes)
	return resp.GetTypes(), err
}
