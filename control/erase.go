package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// ReasonErased is the ErrorInfo reason of a read whose payload was erased;
// the REST gateway answers it with 410 Gone.
const ReasonErased = "PAYLOAD_ERASED"

// erasedError is the answer to a read of an erased payload.
func erasedError(what string) error {
	st := status.Newf(codes.NotFound, "%s was erased with the tenant's data key: no node can read it any more", what)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonErased, Domain: "hookline"}); err == nil {
		st = d
	}
	return st.Err()
}

// isErased reports whether err is an [erasedError].
func isErased(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.NotFound {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonErased {
			return true
		}
	}
	return false
}

// goneWriter turns the status the gateway writes for an erased payload
// into 410 Gone.
type goneWriter struct{ http.ResponseWriter }

func (w goneWriter) WriteHeader(code int) {
	if code == http.StatusNotFound {
		code = http.StatusGone
	}
	w.ResponseWriter.WriteHeader(code)
}

// EraseTenant crypto-shreds a tenant's payloads (admin only): it records
// the destruction of the tenant's current data key in the tenant's
// stream (TenantErased), destroys the key in the vault, replaces the
// vault's key-encryption key (with a KEK store: every copy of the vault
// made before opens nothing), and answers once every member has applied
// the record, so that no node opens with a copy it held in memory. The order makes a crash harmless: a key whose
// erasure is recorded is refused everywhere, and the next seal or erase
// destroys it if it is still in the vault.
func (s *Server) EraseTenant(ctx context.Context, req *controlv1.EraseTenantRequest) (*controlv1.EraseTenantResponse, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	tenantID := req.GetTenantId()
	if err := checkID("tenant_id", tenantID); err != nil {
		return nil, toStatus(err)
	}
	if req.GetConfirm() != tenantID {
		return nil, toStatus(invalid("confirm", "is %q; erasure cannot be undone, so confirm must repeat the tenant id %q", req.GetConfirm(), tenantID))
	}
	if s.cfg.Payloads == nil {
		return nil, status.Error(codes.FailedPrecondition, "this node's store keeps no key vault, so its payloads are not sealed and cannot be erased; erasure needs the embedded or PostgreSQL store")
	}
	keyID, err := s.cfg.Payloads.CurrentKey(ctx, tenantID)
	if err != nil {
		return nil, toStatus(fmt.Errorf("erase tenant %s: %w", tenantID, err))
	}
	reply, err := s.askTenant(ctx, tenantID, &internalv1.TenantCommand{IssuedBy: c.Actor(),
		Command: &internalv1.TenantCommand_Erase{Erase: &internalv1.EraseTenant{Request: req, DataKeyId: keyID}}})
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.cfg.Payloads.Destroy(ctx, tenantID, keyID); err != nil {
		return nil, toStatus(fmt.Errorf("erase tenant %s: the erasure is recorded, the key not yet destroyed (erase again): %w", tenantID, err))
	}
	// With a KEK store: no copy of the vault made before opens any more.
	if err := s.cfg.Payloads.RotateKEK(ctx); err != nil {
		return nil, status.Errorf(codes.Unavailable,
			"erase tenant %s: the erasure is recorded and data key %s destroyed in the vault, but the vault's key-encryption key was not replaced (%v): copies of the vault made before still hold the key until a later erasure replaces it; do not erase again (that would erase what was published since)",
			tenantID, keyID, err)
	}
	s.cfg.Logger.Warn("tenant payloads erased", slog.String("tenant_id", tenantID), slog.String("data_key_id", keyID))
	erasedAt := reply.GetTenant().GetErasedAt()
	if erasedAt == nil {
		erasedAt = timestamppb.New(s.cfg.Now())
	}
	if err := s.settleEvery(ctx); err != nil {
		return nil, status.Errorf(codes.Unavailable,
			"erase tenant %s: the erasure is recorded and data key %s destroyed, but not every member has applied it yet (%v); until one does it may still deliver or serve the payloads it holds in memory; do not erase again (that would erase what was published since): check the member, which applies it as it catches up or holds nothing once restarted",
			tenantID, keyID, err)
	}
	return &controlv1.EraseTenantResponse{TenantId: tenantID, DataKeyId: keyID, ErasedAt: erasedAt}, nil
}

// everyMember is the node's settlement, which can say which members did
// not confirm a position in time (node.settlement).
type everyMember interface {
	WaitForEvery(ctx context.Context, pos events.Position) error
}

// settleEvery is settle that fails when a member did not confirm: an
// erasure answers only once no member can still open the erased key with
// a copy it holds in memory, nor send or serve what it opened with it.
func (s *Server) settleEvery(ctx context.Context) error {
	p, ok := s.cfg.Projections.(everyMember)
	if !ok {
		return s.settle(ctx) // one node: its own projections are all there is
	}
	head, err := s.cfg.Log.Head(ctx)
	if err != nil {
		return fmt.Errorf("read log head: %w", err)
	}
	return p.WaitForEvery(ctx, head)
}

// GetEvent returns one published event with its payload in clear, or
// PAYLOAD_ERASED when its tenant's data key was destroyed.
func (s *Server) GetEvent(ctx context.Context, req *controlv1.GetEventRequest) (*controlv1.Event, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if err := checkEventID(req.GetEventId()); err != nil {
		return nil, toStatus(err)
	}
	p, rec, archived, err := s.published(ctx, tenantID, req.GetEventId())
	if err != nil {
		return nil, err
	}
	v := &controlv1.Event{
		EventId: p.GetEventId(), EventType: p.GetEventType(), ContentType: p.GetContentType(), PayloadSha256: p.GetPayloadSha256(),
		AcceptedAt: timestamppb.New(rec.Recorded), OccurredAt: p.GetOccurredAt(), ObjectId: p.GetObjectId(), ObjectVersion: p.GetObjectVersion(),
		OrderingKey: p.GetOrderingKey(), Sealed: p.GetPayloadSeal() != nil, FromArchive: archived,
	}
	opened, err := s.cfg.Payloads.OpenEvent(ctx, p)
	if errors.Is(err, seal.ErrErased) {
		return nil, erasedError(fmt.Sprintf("the payload of event %s", p.GetEventId()))
	}
	if err != nil {
		return nil, toStatus(fmt.Errorf("event %s: %w", p.GetEventId(), err))
	}
	v.Payload = opened.GetPayload()
	return v, nil
}

// published reads an event's EventPublished as the log holds it (its
// payload sealed), or the archive when the log dropped it (archived);
// NOT_FOUND when neither has it.
func (s *Server) published(ctx context.Context, tenantID, eventID string) (p *hooklinev1.EventPublished, rec *events.Record, archived bool, err error) {
	stream := events.EventStream(tenantID, eventID)
	recs, err := s.cfg.Log.ReadStream(ctx, stream, events.Forwards, 0, 1)
	if errors.Is(err, events.ErrStreamNotFound) && s.cfg.Archive != nil {
		recs, err = s.cfg.Archive.ReadStream(ctx, stream)
		archived = true
	}
	if errors.Is(err, events.ErrStreamNotFound) || (err == nil && len(recs) == 0) {
		return nil, nil, false, status.Errorf(codes.NotFound, "event_id %q: no such event for this tenant (the log keeps events 30 days, or its node's retention, and no archive holds it)", eventID)
	}
	if err != nil {
		return nil, nil, false, toStatus(fmt.Errorf("read %s: %w", stream, err))
	}
	msg, err := events.Decode(&recs[0])
	if err != nil {
		return nil, nil, false, toStatus(fmt.Errorf("decode %s: %w", stream, err))
	}
	p, ok := msg.(*hooklinev1.EventPublished)
	if !ok {
		return nil, nil, false, toStatus(fmt.Errorf("read %s: first event is %s, not EventPublished", stream, recs[0].Type))
	}
	return p, &recs[0], archived, nil
}

// openResponses opens the sealed response bodies of a delivery's
// attempts, in place (the attempts are the view's own copies); those
// erased lose their body and mark the view erased.
func (s *Server) openResponses(ctx context.Context, v *controlv1.Delivery) error {
	for i, a := range v.GetAttempts() {
		if a.GetErrorClass() == hooklinev1.ErrorClass_ERROR_CLASS_ERASED {
			v.Erased = true
		}
		if a.GetResponseSeal() == nil {
			continue
		}
		clear, err := s.cfg.Payloads.Open(ctx, v.GetTenantId(), seal.ResponseAAD(v.GetTenantId(), v.GetDeliveryId()), a.GetResponsePrefix(), a.GetResponseSeal())
		switch {
		case errors.Is(err, seal.ErrErased):
			v.Erased = true
			clear = nil
		case err != nil:
			return fmt.Errorf("delivery %s, attempt %d: %w", v.GetDeliveryId(), a.GetNumber(), err)
		}
		a = cloneOf(a)
		a.ResponsePrefix, a.ResponseSeal = clear, nil
		v.Attempts[i] = a
	}
	return nil
}

// auditOpen returns msg with its sealed payload or response body in clear
// for the audit views, and the JSON paths of those that were erased (their
// place shows "erased"). What cannot be opened otherwise stays sealed.
func (s *Server) auditOpen(ctx context.Context, msg proto.Message) (proto.Message, [][]string) {
	switch m := msg.(type) {
	case *hooklinev1.EventPublished:
		opened, err := s.cfg.Payloads.OpenEvent(ctx, m)
		if errors.Is(err, seal.ErrErased) {
			return seal.ErasedEvent(m), [][]string{{"payload"}}
		}
		if err == nil {
			opened = proto.CloneOf(opened)
			opened.PayloadSeal = nil
			return opened, nil
		}
	case *hooklinev1.DeliveriesPlanned:
		// The filters' errors, which may quote the payload: opened, or
		// erased with it.
		filtered, _, err := s.cfg.Payloads.OpenFiltered(ctx, m.GetTenantId(), m.GetEventId(), m.GetFiltered())
		if err == nil {
			out := proto.CloneOf(m)
			out.Filtered = filtered
			return out, nil
		}
	case *hooklinev1.AttemptSucceeded:
		a, erased := s.auditAttempt(ctx, m.GetAttempt())
		return &hooklinev1.AttemptSucceeded{Attempt: a}, erased
	case *hooklinev1.AttemptFailed:
		a, erased := s.auditAttempt(ctx, m.GetAttempt())
		out := proto.CloneOf(m)
		out.Attempt = a
		return out, erased
	}
	return msg, nil
}

// auditAttempt opens an attempt's sealed response body for auditOpen.
func (s *Server) auditAttempt(ctx context.Context, a *hooklinev1.Attempt) (*hooklinev1.Attempt, [][]string) {
	if a.GetResponseSeal() == nil {
		return a, nil
	}
	clear, err := s.cfg.Payloads.Open(ctx, a.GetTenantId(), seal.ResponseAAD(a.GetTenantId(), a.GetDeliveryId()), a.GetResponsePrefix(), a.GetResponseSeal())
	if err != nil && !errors.Is(err, seal.ErrErased) {
		return a, nil
	}
	a = proto.CloneOf(a)
	a.ResponsePrefix, a.ResponseSeal = clear, nil
	if err != nil {
		return a, [][]string{{"attempt", "response_prefix"}}
	}
	return a, nil
}

// markErased writes "erased" at each path of st.
func markErased(st *structpb.Struct, paths [][]string) {
	for _, p := range paths {
		at := st
		for _, name := range p[:len(p)-1] {
			next := at.GetFields()[name].GetStructValue()
			if next == nil {
				next = &structpb.Struct{Fields: map[string]*structpb.Value{}}
				at.Fields[name] = structpb.NewStructValue(next)
			}
			at = next
		}
		at.Fields[p[len(p)-1]] = structpb.NewStringValue("erased")
	}
}
