package seal

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Text drawn from a payload is sealed with it: a schema violation's
// pointer and message, and a filter's error, quote the payload's keys and
// values ('…' does not match pattern, invalid RFC 3339 timestamp "…"), so
// where the payload is sealed they are sealed under the same data key,
// and erased with it. Only what comes from the schema or the filter (the
// schema's version, the rule's keyword, whether a filter failed) stays in
// clear.

// ErasedText stands in the place of text that was erased with its
// payload, in answers and audit views.
const ErasedText = "erased"

// ViolationAAD binds a sealed schema violation to its tenant and event.
func ViolationAAD(tenantID, eventID string) []byte {
	return fmt.Appendf(nil, "tenant/%s/event/%s/schema-violation", tenantID, eventID)
}

// FilterErrorAAD binds a sealed filter error to its event and endpoint.
func FilterErrorAAD(tenantID, eventID, endpointID string) []byte {
	return fmt.Appendf(nil, "tenant/%s/event/%s/filter/%s/error", tenantID, eventID, endpointID)
}

// SealUnder seals clear under the data key that under names: the seal of
// the payload the bytes come from (a response to it, text quoting it), so
// they are erased with that payload, never sealed under a newer key. With
// under nil (the payload is in clear), or on a node that seals nothing
// new, it returns nil: the bytes stay in clear, as the payload does. It
// fails with [ErrErased] when that key was destroyed.
func (p *Payloads) SealUnder(ctx context.Context, tenantID string, under *hooklinev1.PayloadSeal, aad, clear []byte) (*hooklinev1.SealedText, error) {
	if p == nil || p.plain || under == nil {
		return nil, nil
	}
	id := under.GetDataKeyId()
	if p.erased(tenantID, id) {
		return nil, ErrErased
	}
	k, err := p.keyOf(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := io.ReadFull(p.rand, nonce); err != nil {
		return nil, fmt.Errorf("seal: read nonce: %w", err)
	}
	return &hooklinev1.SealedText{Ciphertext: k.aead.Seal(nil, nonce, clear, aad), Seal: &hooklinev1.PayloadSeal{DataKeyId: id, Nonce: nonce}}, nil
}

// OpenText opens what SealUnder sealed (nil opens to nil). It fails with
// [ErrErased] when its data key was destroyed.
func (p *Payloads) OpenText(ctx context.Context, tenantID string, aad []byte, t *hooklinev1.SealedText) ([]byte, error) {
	if t == nil {
		return nil, nil
	}
	if t.GetSeal() == nil {
		return nil, fmt.Errorf("%w: sealed text without its seal", ErrOpen)
	}
	return p.Open(ctx, tenantID, aad, t.GetCiphertext(), t.GetSeal())
}

// sealViolation returns v with its pointer and message sealed under the
// payload's seal (v itself when there is nothing to seal).
func (p *Payloads) sealViolation(ctx context.Context, ev *hooklinev1.EventPublished, under *hooklinev1.PayloadSeal) (*hooklinev1.SchemaViolation, error) {
	v := ev.GetSchemaViolation()
	if v == nil || v.GetSealed() != nil || v.GetPointer() == "" && v.GetMessage() == "" {
		return v, nil
	}
	detail, err := proto.Marshal(&hooklinev1.SchemaViolation{Pointer: v.GetPointer(), Message: v.GetMessage()})
	if err != nil {
		return nil, err
	}
	sealed, err := p.SealUnder(ctx, ev.GetTenantId(), under, ViolationAAD(ev.GetTenantId(), ev.GetEventId()), detail)
	if err != nil || sealed == nil {
		return v, err
	}
	return &hooklinev1.SchemaViolation{SchemaVersion: v.GetSchemaVersion(), Keyword: v.GetKeyword(), Sealed: sealed}, nil
}

// openViolation returns ev's violation with its pointer and message in
// clear (as it is when they are not sealed).
func (p *Payloads) openViolation(ctx context.Context, ev *hooklinev1.EventPublished) (*hooklinev1.SchemaViolation, error) {
	v := ev.GetSchemaViolation()
	if v.GetSealed() == nil {
		return v, nil
	}
	detail, err := p.OpenText(ctx, ev.GetTenantId(), ViolationAAD(ev.GetTenantId(), ev.GetEventId()), v.GetSealed())
	if err != nil {
		return nil, err
	}
	var d hooklinev1.SchemaViolation
	if err := proto.Unmarshal(detail, &d); err != nil {
		return nil, fmt.Errorf("%w: the schema violation of event %s is damaged", ErrOpen, ev.GetEventId())
	}
	return &hooklinev1.SchemaViolation{SchemaVersion: v.GetSchemaVersion(), Keyword: v.GetKeyword(), Pointer: d.GetPointer(), Message: d.GetMessage()}, nil
}

// ErasedEvent returns a copy of ev, whose payload was erased, as the
// views show it: no payload, and [ErasedText] in the place of what its
// schema violation quoted.
func ErasedEvent(ev *hooklinev1.EventPublished) *hooklinev1.EventPublished {
	out := proto.CloneOf(ev)
	out.Payload = nil
	out.SchemaViolation = ErasedViolation(ev.GetSchemaViolation())
	return out
}

// ErasedViolation returns what stays of an erased payload's schema
// violation: its schema version and rule, and [ErasedText] in the place
// of its pointer and message. Nil stays nil.
func ErasedViolation(v *hooklinev1.SchemaViolation) *hooklinev1.SchemaViolation {
	if v == nil {
		return nil
	}
	return &hooklinev1.SchemaViolation{SchemaVersion: v.GetSchemaVersion(), Keyword: v.GetKeyword(), Pointer: ErasedText, Message: ErasedText}
}

// SealFiltered returns copies of fs, the filter verdicts of an event whose
// payload is sealed under under, with each error sealed with the payload
// (fs itself when there is nothing to seal).
func (p *Payloads) SealFiltered(ctx context.Context, tenantID, eventID string, under *hooklinev1.PayloadSeal, fs []*hooklinev1.FilteredEndpoint) ([]*hooklinev1.FilteredEndpoint, error) {
	if p == nil || p.plain || under == nil {
		return fs, nil
	}
	out := make([]*hooklinev1.FilteredEndpoint, len(fs))
	for i, f := range fs {
		out[i] = f
		if f.GetError() == "" {
			continue
		}
		sealed, err := p.SealUnder(ctx, tenantID, under, FilterErrorAAD(tenantID, eventID, f.GetEndpointId()), []byte(f.GetError()))
		if err != nil {
			return nil, fmt.Errorf("seal the filter error of endpoint %s: %w", f.GetEndpointId(), err)
		}
		out[i] = &hooklinev1.FilteredEndpoint{EndpointId: f.GetEndpointId(), ConfigVersion: f.GetConfigVersion(), SealedError: sealed}
	}
	return out, nil
}

// OpenFiltered returns copies of fs with their sealed errors in clear;
// those erased with their payload read [ErasedText], and erased says so.
func (p *Payloads) OpenFiltered(ctx context.Context, tenantID, eventID string, fs []*hooklinev1.FilteredEndpoint) (out []*hooklinev1.FilteredEndpoint, erased bool, err error) {
	out = make([]*hooklinev1.FilteredEndpoint, len(fs))
	for i, f := range fs {
		out[i] = f
		if f.GetSealedError() == nil {
			continue
		}
		text, err := p.OpenText(ctx, tenantID, FilterErrorAAD(tenantID, eventID, f.GetEndpointId()), f.GetSealedError())
		switch {
		case errors.Is(err, ErrErased):
			text, erased = []byte(ErasedText), true
		case err != nil:
			return nil, false, fmt.Errorf("the filter error of endpoint %s: %w", f.GetEndpointId(), err)
		}
		out[i] = &hooklinev1.FilteredEndpoint{EndpointId: f.GetEndpointId(), ConfigVersion: f.GetConfigVersion(), Error: string(text)}
	}
	return out, erased, nil
}
