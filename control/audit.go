package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Audit paging: page sizes, and how many log records one category page
// may scan (a category is a filter over the whole log: a rare one would
// otherwise read it all in one call), read auditReadBatch at a time (a
// batch holds payloads of up to 256 KiB each: 200 bound it to 50 MiB).
const (
	auditDefaultPage = 50
	auditMaxPage     = 500
	auditScanBudget  = 20000
	auditReadBatch   = 200
)

// ReadStream reads one stream of the log a page at a time (admin only).
func (s *Server) ReadStream(ctx context.Context, req *controlv1.ReadStreamRequest) (*controlv1.AuditPage, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	stream := req.GetStream()
	if err := checkStreamName(stream); err != nil {
		return nil, toStatus(err)
	}
	size, err := auditPageSize(req.GetPageSize())
	if err != nil {
		return nil, toStatus(err)
	}
	dir, from := events.Forwards, events.Revision(0)
	if req.GetBackwards() {
		dir, from = events.Backwards, events.End
	}
	if c := req.GetCursor(); c != "" {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			return nil, toStatus(invalid("cursor", "is not a cursor of this stream; pass next_cursor unchanged"))
		}
		from = events.Revision(n)
	}
	// One record more than the page tells whether another page follows.
	recs, err := s.cfg.Log.ReadStream(ctx, stream, dir, from, size+1)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, status.Errorf(codes.NotFound, "stream %q has no events (event and delivery streams are kept 30 days)", stream)
	}
	if err != nil {
		return nil, toStatus(fmt.Errorf("read %s: %w", stream, err))
	}
	page := &controlv1.AuditPage{}
	if len(recs) > size {
		page.NextCursor = strconv.FormatUint(uint64(recs[size].Revision), 10)
		recs = recs[:size]
	}
	for i := range recs {
		page.Events = append(page.Events, s.auditEvent(ctx, &recs[i]))
	}
	if s.cfg.AuditLink != nil {
		page.EsdbUrl = s.cfg.AuditLink(stream)
	}
	return page, nil
}

// ReadCategory reads the events of a category's streams in log order
// (admin only). One call scans at most auditScanBudget records: a page may
// come back short, with a cursor, before the end of the log.
func (s *Server) ReadCategory(ctx context.Context, req *controlv1.ReadCategoryRequest) (*controlv1.AuditPage, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	cat := req.GetCategory()
	if cat == "" || len(cat) > 64 || strings.ContainsFunc(cat, func(r rune) bool { return (r < 'a' || r > 'z') && r != '_' }) {
		return nil, toStatus(invalid("category", "%q is not a category; use one of tenant, endpoint, event, delivery, portal", cat))
	}
	size, err := auditPageSize(req.GetPageSize())
	if err != nil {
		return nil, toStatus(err)
	}
	from := events.Start
	if c := req.GetCursor(); c != "" {
		if from, err = parsePosition(c); err != nil {
			return nil, toStatus(invalid("cursor", "is not a cursor of this category; pass next_cursor unchanged"))
		}
	}
	prefix, typ := cat+"-", req.GetEventType()
	page := &controlv1.AuditPage{}
	last := from
	for page.Scanned < auditScanBudget {
		recs, err := s.cfg.Log.ReadAll(ctx, last, auditReadBatch)
		if err != nil {
			return nil, toStatus(fmt.Errorf("read the log: %w", err))
		}
		for i := range recs {
			r := &recs[i]
			page.Scanned++
			last = r.Position
			if strings.HasPrefix(r.Stream, prefix) && (typ == "" || r.Type == typ) {
				page.Events = append(page.Events, s.auditEvent(ctx, r))
				if len(page.Events) == size {
					page.NextCursor = formatPosition(last)
					return page, nil
				}
			}
		}
		if len(recs) < auditReadBatch {
			return page, nil // the end of the log, as of now
		}
	}
	page.NextCursor = formatPosition(last)
	return page, nil
}

// TraceDelivery follows one delivery from its publish to its last attempt
// (admin only): the event's stream (EventPublished, DeliveriesPlanned) and
// the delivery's stream, in log order.
func (s *Server) TraceDelivery(ctx context.Context, req *controlv1.TraceDeliveryRequest) (*controlv1.DeliveryTrace, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if err := checkID("tenant_id", req.GetTenantId()); err != nil {
		return nil, toStatus(err)
	}
	d, attempts, err := s.delivery(ctx, req.GetTenantId(), req.GetDeliveryId(), events.Start)
	if err != nil {
		return nil, err
	}
	view := deliveryView(d, attempts)
	if err := s.openResponses(ctx, view); err != nil {
		return nil, toStatus(err)
	}
	out := &controlv1.DeliveryTrace{
		Delivery:       view,
		EventStream:    events.EventStream(d.TenantID, d.EventID),
		DeliveryStream: events.DeliveryStream(d.ID),
	}
	var recs []events.Record
	for _, stream := range []string{out.EventStream, out.DeliveryStream} {
		rs, err := s.cfg.Log.ReadStream(ctx, stream, events.Forwards, 0, 4096)
		if errors.Is(err, events.ErrStreamNotFound) && s.cfg.Archive != nil {
			// Past the log's retention: the archive's copy.
			if rs, err = s.cfg.Archive.ReadStream(ctx, stream); err == nil {
				out.FromArchive = true
			}
		}
		if err != nil && !errors.Is(err, events.ErrStreamNotFound) { // no attempt yet: no delivery stream
			return nil, toStatus(fmt.Errorf("read %s: %w", stream, err))
		}
		recs = append(recs, rs...)
	}
	slices.SortStableFunc(recs, func(a, b events.Record) int {
		switch {
		case a.Position.Less(b.Position):
			return -1
		case b.Position.Less(a.Position):
			return 1
		}
		return 0
	})
	for i := range recs {
		out.Events = append(out.Events, s.auditEvent(ctx, &recs[i]))
	}
	return out, nil
}

// auditEvent decodes a record for the audit browser. A record this build
// cannot decode keeps its envelope and no data.
func (s *Server) auditEvent(ctx context.Context, r *events.Record) *controlv1.AuditEvent {
	ev := &controlv1.AuditEvent{
		Stream: r.Stream, Revision: uint64(r.Revision), Position: r.Position.String(), EventId: r.ID.String(),
		Type: r.Type, RecordedAt: timestamppb.New(r.Recorded), Partition: int32(r.Partition),
	}
	if s.cfg.AuditLink != nil {
		ev.EsdbUrl = s.cfg.AuditLink(r.Stream)
	}
	msg, err := events.Decode(r)
	if err != nil {
		return ev
	}
	ev.IssuedBy = issuedBy(msg)
	msg, erased := s.auditOpen(ctx, msg)
	if b, err := (protojson.MarshalOptions{UseProtoNames: true}).Marshal(msg); err == nil {
		st := &structpb.Struct{}
		if protojson.Unmarshal(b, st) == nil {
			markErased(st, erased)
			ev.Data = st
		}
	}
	return ev
}

// issuedBy finds who caused an event: its issued_by field, or its
// attempt's.
func issuedBy(msg proto.Message) *hooklinev1.Actor {
	m := msg.ProtoReflect()
	fields := m.Descriptor().Fields()
	if fd := fields.ByName("issued_by"); fd != nil && m.Has(fd) {
		if a, ok := m.Get(fd).Message().Interface().(*hooklinev1.Actor); ok {
			return a
		}
	}
	if fd := fields.ByName("attempt"); fd != nil && m.Has(fd) {
		if a, ok := m.Get(fd).Message().Interface().(*hooklinev1.Attempt); ok {
			return a.GetIssuedBy()
		}
	}
	return nil
}

func auditPageSize(n int32) (int, error) {
	switch {
	case n == 0:
		return auditDefaultPage, nil
	case n < 0 || n > auditMaxPage:
		return 0, invalid("page_size", "is %d; give 1 to %d (0 means %d)", n, auditMaxPage, auditDefaultPage)
	}
	return int(n), nil
}

func checkStreamName(s string) error {
	if s == "" || len(s) > 512 {
		return invalid("stream", "give a stream name such as endpoint-ep_123 (1 to 512 characters)")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return invalid("stream", "has a space or control character at offset %d", i)
		}
	}
	return nil
}

// formatPosition and parsePosition make a category cursor: commit.prepare.
func formatPosition(p events.Position) string {
	return strconv.FormatUint(p.Commit, 10) + "." + strconv.FormatUint(p.Prepare, 10)
}

func parsePosition(s string) (events.Position, error) {
	c, p, ok := strings.Cut(s, ".")
	if !ok {
		return events.Position{}, errors.New("no dot")
	}
	commit, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		return events.Position{}, err
	}
	prepare, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return events.Position{}, err
	}
	return events.Position{Commit: commit, Prepare: prepare}, nil
}
