package control

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/filter"
	"github.com/hookline/hookline/operational"
	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// Publish records one event and its planned deliveries in one atomic append
// to event-{tenant}.{event_id} with expected revision NoStream.
func (s *Server) Publish(ctx context.Context, req *controlv1.PublishRequest) (*controlv1.PublishResponse, error) {
	tenantID, caller, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	resp, err := s.publish(ctx, tenantID, caller, req)
	return resp, toStatus(err)
}

// PublishBatch publishes each event on its own: one bad event does not stop
// the others, and each result says what happened to its event. The events
// are published concurrently, so that their appends share the log's group
// commits instead of waiting for one sync each; events that repeat an
// event_id of the batch are published after it, in batch order, so the
// first one is the original and the others are answered as duplicates.
func (s *Server) PublishBatch(ctx context.Context, req *controlv1.PublishBatchRequest) (*controlv1.PublishBatchResponse, error) {
	tenantID, caller, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	evs := req.GetEvents()
	if n := len(evs); n == 0 || n > s.cfg.MaxBatch {
		return nil, toStatus(invalid("events", "has %d events; send 1 to %d per batch", n, s.cfg.MaxBatch))
	}
	// An event that names another tenant is a caller's mistake that would
	// otherwise be published for the batch's tenant: refuse the batch
	// before anything is written.
	for i, ev := range evs {
		if t := ev.GetTenantId(); t != "" && t != tenantID {
			return nil, toStatus(invalid(fmt.Sprintf("events[%d].tenant_id", i),
				"is %q but the batch publishes for tenant %q; leave it empty or send the event in a batch of its own tenant", t, tenantID))
		}
	}
	out := &controlv1.PublishBatchResponse{Results: make([]*controlv1.PublishResult, len(evs))}
	one := func(i int) {
		resp, err := s.publish(ctx, tenantID, caller, evs[i])
		r := &controlv1.PublishResult{Response: resp}
		if err != nil {
			st, _ := status.FromError(toStatus(err))
			r.ErrorCode = st.Code().String()
			r.ErrorMessage = fmt.Sprintf("events[%d]: %s", i, st.Message())
		}
		out.Results[i] = r
	}
	// Indexes of the events by event_id, in batch order: each group runs
	// on its own goroutine, its events one after the other.
	groups := make(map[string][]int, len(evs))
	order := make([]string, 0, len(evs))
	for i, ev := range evs {
		id := ev.GetEventId()
		if _, ok := groups[id]; !ok {
			order = append(order, id)
		}
		groups[id] = append(groups[id], i)
	}
	var wg sync.WaitGroup
	for _, id := range order {
		wg.Go(func() {
			for _, i := range groups[id] {
				one(i)
			}
		})
	}
	wg.Wait()
	return out, nil
}

func (s *Server) publish(ctx context.Context, tenantID string, caller Caller, req *controlv1.PublishRequest) (*controlv1.PublishResponse, error) {
	start := s.cfg.Now()
	published, err := s.eventOf(tenantID, caller, req)
	if err != nil {
		return nil, err
	}
	if err := s.checkSchema(published); err != nil {
		return nil, toStatus(err)
	}
	if published.Traceparent, published.Tracestate, err = traceOf(ctx, req); err != nil {
		return nil, err
	}
	refs, err := s.cfg.Registry.EndpointsForType(tenantID, published.GetEventType())
	if err != nil {
		return nil, err
	}
	if len(refs) > s.cfg.MaxPlanned {
		return nil, status.Errorf(codes.FailedPrecondition,
			"type: %q reaches %d endpoints of tenant %s, over the %d deliveries one publish may plan; subscribe fewer endpoints to this type, or have the operator raise the node's limit (hookline serve --max-planned)",
			published.GetEventType(), len(refs), tenantID, s.cfg.MaxPlanned)
	}
	resp, err := s.record(ctx, published, refs)
	if err == nil && !resp.GetDuplicate() && published.GetSchemaViolation() != nil {
		s.schemaCounts.warned.Add(1)
	}
	if err == nil && !resp.GetDuplicate() && s.cfg.Spans != nil {
		s.cfg.Spans.Published(published, start, s.cfg.Now())
	}
	return resp, err
}

// record plans published for refs (those whose filter passes it) and
// appends it with its plan, or answers a repeated publish from the stream.
func (s *Server) record(ctx context.Context, published *hooklinev1.EventPublished, refs []registry.EndpointRef) (*controlv1.PublishResponse, error) {
	tenantID, now := published.GetTenantId(), s.cfg.Now()
	planned, filtered := s.route(published, refs)
	if s.cfg.PlanFault != nil {
		planned = s.cfg.PlanFault.ShortPlan(planned)
	}
	stream := events.EventStream(tenantID, published.GetEventId())
	stored, err := s.cfg.Payloads.SealEvent(ctx, published)
	if err != nil {
		return nil, fmt.Errorf("publish %s: seal the payload: %w", stream, err)
	}
	// A filter's error may quote the payload: sealed with it.
	storedFiltered, err := s.cfg.Payloads.SealFiltered(ctx, tenantID, published.GetEventId(), stored.GetPayloadSeal(), filtered)
	if errors.Is(err, seal.ErrErased) {
		// The key was erased between the two seals; nothing is written.
		return nil, status.Errorf(codes.Unavailable, "publish %s: the tenant's payloads were erased while this event was published, and nothing was recorded; publish it again (under the tenant's new data key)", stream)
	}
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", stream, err)
	}
	evs, err := s.plan(stream, stored, planned, storedFiltered, now)
	if err != nil {
		return nil, err
	}
	// The append expects no stream: a repeated publish (or the second of
	// two racing first publishes) fails it, and is answered from the
	// stream (duplicate, the original plan). Most publishes are first
	// ones, so the stream is not read before.
	res, err := s.cfg.Log.Append(ctx, stream, events.NoStream{}, evs...)
	if err != nil {
		if errors.Is(err, events.ErrWrongRevision) {
			return s.republish(ctx, stream, published)
		}
		return nil, fmt.Errorf("publish %s: %w", stream, err)
	}
	s.cfg.Logger.Debug("event published", slog.String("tenant_id", tenantID), slog.String("event_id", published.GetEventId()), slog.Int("deliveries", len(planned)))
	if s.cfg.Payloads.Erased(tenantID, stored.GetPayloadSeal().GetDataKeyId()) {
		// Sealed under a key whose erasure this node applied while the
		// publish ran: recorded, erased, never delivered. The answer says
		// so, so that an answer without it, given once the erasure has
		// returned, always means a readable payload (see erasedAnswer).
		return erasedAnswer(&controlv1.PublishResponse{EventId: published.GetEventId(), Deliveries: planned, Filtered: storedFiltered,
			TraceId: traceID(published), SchemaViolation: published.GetSchemaViolation()}), nil
	}
	if s.cfg.HandOver != nil && len(planned) > 0 {
		handed := published
		if stored.GetPayloadSeal() != nil {
			// In clear, naming the data key it is sealed under in the
			// log, as an opened event does: a grain checks that key is
			// not erased before each attempt.
			handed = proto.CloneOf(published)
			handed.PayloadSeal = stored.GetPayloadSeal()
		}
		s.cfg.HandOver.HandOver(handed, &hooklinev1.DeliveriesPlanned{
			TenantId: tenantID, EventId: published.GetEventId(), EventType: published.GetEventType(),
			Deliveries: planned, At: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(s.cfg.DeliveryDeadline)),
			OrderingKey: published.GetOrderingKey(),
		}, res.Position)
	}
	return &controlv1.PublishResponse{EventId: published.GetEventId(), Deliveries: planned, Filtered: filtered, TraceId: traceID(published),
		SchemaViolation: published.GetSchemaViolation()}, nil
}

// maxFilterError bounds a filter's error as the plan records it.
const maxFilterError = 256

// route decides, for each subscribed endpoint, whether the event is
// planned for it: every endpoint without a filter, and those whose
// filter (compiled once per endpoint and config version) passes it. The
// payload is parsed at most once, for all the filters that read it.
func (s *Server) route(published *hooklinev1.EventPublished, refs []registry.EndpointRef) (planned []*hooklinev1.PlannedDelivery, filtered []*hooklinev1.FilteredEndpoint) {
	planned = make([]*hooklinev1.PlannedDelivery, 0, len(refs))
	var in *filter.Input
	for _, ref := range refs {
		d := &hooklinev1.PlannedDelivery{
			DeliveryId:    events.DeliveryID(published.GetTenantId(), published.GetEventId(), ref.ID),
			EndpointId:    ref.ID,
			ConfigVersion: ref.ConfigVersion,
		}
		if published.GetOrderingKey() != "" {
			d.Ordering = ref.Ordering
		}
		if ref.Filter != "" {
			if in == nil {
				in = filter.NewInput(filter.EventOf(published))
			}
			passed := false
			f, err := s.filters.Get(ref.ID, ref.ConfigVersion, ref.Filter)
			if err == nil {
				passed, err = f.Match(in)
			}
			if !passed {
				filtered = append(filtered, &hooklinev1.FilteredEndpoint{EndpointId: ref.ID, ConfigVersion: ref.ConfigVersion, Error: truncate(errText(err), maxFilterError)})
				continue
			}
			d.FilterPassed = true
		}
		planned = append(planned, d)
	}
	return planned, filtered
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// eventOf validates a publish request and builds its EventPublished.
func (s *Server) eventOf(tenantID string, caller Caller, req *controlv1.PublishRequest) (*hooklinev1.EventPublished, error) {
	if err := checkEventID(req.GetEventId()); err != nil {
		return nil, err
	}
	if err := checkEventType("type", req.GetType()); err != nil {
		return nil, err
	}
	if operational.Reserved(req.GetType()) {
		return nil, invalid("type", "%q starts with %q, which Hookline keeps for its own operational events (GET /v1/operational-event-types); use another name", req.GetType(), operational.Prefix)
	}
	if err := checkSchemaVersion(req.GetSchemaVersion()); err != nil {
		return nil, err
	}
	if err := checkText("object_id", req.GetObjectId(), maxObjectIDLen); err != nil {
		return nil, err
	}
	if req.GetObjectVersion() < 0 {
		return nil, invalid("object_version", "is negative")
	}
	if err := checkContentType(req.GetContentType()); err != nil {
		return nil, err
	}
	headers, err := checkHeaders(req.GetHeaders())
	if err != nil {
		return nil, err
	}
	if err := checkOrderingKey(req.GetOrderingKey()); err != nil {
		return nil, err
	}
	payload := req.GetPayload()
	contentType := req.GetContentType()
	if req.GetData() != nil {
		if len(payload) > 0 {
			return nil, invalid("data", "and payload are both set; give the JSON value in data or the raw bytes in payload, not both")
		}
		raw, err := protojson.Marshal(req.GetData())
		if err != nil {
			return nil, invalid("data", "is not a JSON value: %v", err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, invalid("data", "is not a JSON value: %v", err)
		}
		payload = buf.Bytes()
	}
	if len(payload) == 0 {
		return nil, invalid("payload", "is empty; send the event body in payload (bytes) or data (a JSON value)")
	}
	if len(payload) > s.cfg.MaxPayload {
		return nil, invalid("payload", "is %d bytes, over the %d-byte limit; send a smaller payload (for example a reference the receiver fetches)", len(payload), s.cfg.MaxPayload)
	}
	if contentType == "" {
		contentType = "application/json"
	}
	sum := sha256.Sum256(payload)
	now := s.cfg.Now()
	occurred := req.GetOccurredAt()
	if occurred == nil {
		occurred = timestamppb.New(now)
	} else if err := occurred.CheckValid(); err != nil {
		return nil, invalid("occurred_at", "%v", err)
	}
	return &hooklinev1.EventPublished{
		TenantId:      tenantID,
		EventId:       req.GetEventId(),
		EventType:     req.GetType(),
		SchemaVersion: req.GetSchemaVersion(),
		ObjectId:      req.GetObjectId(),
		ObjectVersion: req.GetObjectVersion(),
		OccurredAt:    occurred,
		Payload:       payload,
		PayloadSha256: sum[:],
		ContentType:   contentType,
		IssuedBy:      caller.Actor(),
		At:            timestamppb.New(now),
		Headers:       headers,
		OrderingKey:   req.GetOrderingKey(),
	}, nil
}

// maxOrderingKeyLen bounds an ordering key.
const maxOrderingKeyLen = 256

// checkOrderingKey validates a publish's ordering key: empty, or 1 to 256
// printable ASCII characters (it travels in a webhook header).
func checkOrderingKey(k string) error {
	if len(k) > maxOrderingKeyLen {
		return invalid("ordering_key", "is %d characters long; use at most %d (an id of the object the event is about)", len(k), maxOrderingKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return invalid("ordering_key", "has a character that is not printable ASCII at byte %d; use letters, digits and punctuation (it is sent as the webhook-ordering-key header)", i)
		}
	}
	return nil
}

// plan encodes EventPublished (its payload sealed) and its DeliveriesPlanned chunks: the
// planned deliveries and the filtered-out endpoints, by partition.
func (s *Server) plan(stream string, published *hooklinev1.EventPublished, planned []*hooklinev1.PlannedDelivery, filtered []*hooklinev1.FilteredEndpoint, now time.Time) ([]events.Event, error) {
	// Event ids depend on the content, so that a retried append of the same
	// publish is idempotent while a different one is refused by NoStream.
	ev, err := events.Encode(published, "publish/"+hex.EncodeToString(published.GetPayloadSha256()), stream)
	if err != nil {
		return nil, err
	}
	out := []events.Event{ev}
	// One chunk or more per delivery partition; an event with no
	// subscribers still records, in a chunk of no partition, that none
	// were chosen.
	chunks := events.ChunkPlan(planned, filtered)
	if len(chunks) == 0 {
		chunks = []events.PlanChunk{{Partition: events.NoPartition}}
	}
	at := timestamppb.New(now)
	expires := timestamppb.New(now.Add(s.cfg.DeliveryDeadline))
	for i, c := range chunks {
		dp := &hooklinev1.DeliveriesPlanned{
			TenantId:    published.GetTenantId(),
			EventId:     published.GetEventId(),
			EventType:   published.GetEventType(),
			Deliveries:  c.Deliveries,
			Filtered:    c.Filtered,
			Chunk:       int32(i),
			Chunks:      int32(len(chunks)),
			At:          at,
			ExpiresAt:   expires,
			OrderingKey: published.GetOrderingKey(),
		}
		ev, err := events.EncodeIn(dp, fmt.Sprintf("plan/%d/%s", i, digest(valueFree(dp))), stream, c.Partition)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// valueFree is the part of a plan chunk that its event id is drawn from:
// all of it but the filters' errors, which may quote the payload and are
// sealed under a random nonce (a retried append must get the same ids).
// Whether a filter failed is kept: the errors follow from the payload and
// the filters, which the ids already depend on.
func valueFree(dp *hooklinev1.DeliveriesPlanned) *hooklinev1.DeliveriesPlanned {
	out := proto.CloneOf(dp)
	for _, f := range out.GetFiltered() {
		if f.GetError() != "" || f.GetSealedError() != nil {
			f.Error, f.SealedError = "error", nil
		}
	}
	return out
}

// maxChunks bounds the DeliveriesPlanned events read back for a duplicate.
const maxChunks = 10000

// digest returns a short hex digest of a message's deterministic encoding.
func digest(m proto.Message) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
