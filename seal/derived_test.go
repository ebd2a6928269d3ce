package seal_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// TestDerivedTextSealedWithThePayload: a schema violation's pointer and
// message and a filter's error, which quote the payload, are sealed with
// it under its data key (nothing of them in the stored bytes), open in
// their own place only, and are erased with the payload; the schema's
// version and rule stay in clear.
func TestDerivedTextSealedWithThePayload(t *testing.T) {
	const secret = "someone@example.com"
	vault := memVault(t)
	marks := &erasedSet{ids: map[string]bool{}}
	p := seal.NewPayloads(vault, parsed(t, masterA), marks.erased)
	ctx := t.Context()
	ev := &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_1", Payload: []byte(`{"email":"` + secret + `"}`),
		SchemaViolation: &hooklinev1.SchemaViolation{SchemaVersion: 2, Keyword: "additionalProperties", Pointer: "/" + secret, Message: "additional properties '" + secret + "' not allowed"}}
	stored, err := p.SealEvent(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	filtered, err := p.SealFiltered(ctx, "acme", "evt_1", stored.GetPayloadSeal(), []*hooklinev1.FilteredEndpoint{
		{EndpointId: "ep_1", ConfigVersion: 1, Error: `invalid RFC 3339 timestamp "` + secret + `"`},
		{EndpointId: "ep_2", ConfigVersion: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	for what, m := range map[string]proto.Message{"event": stored, "filtered": &hooklinev1.DeliveriesPlanned{Filtered: filtered}} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("the stored %s holds the payload's value in clear: %v", what, m)
		}
	}
	if v := stored.GetSchemaViolation(); v.GetSchemaVersion() != 2 || v.GetKeyword() != "additionalProperties" || v.GetSealed() == nil {
		t.Fatalf("the stored violation: %v, want its version and rule in clear and the rest sealed", v)
	}
	if ev.GetSchemaViolation().GetMessage() == "" {
		t.Fatal("SealEvent changed the event it was given")
	}
	if filtered[1].GetSealedError() != nil || filtered[0].GetSealedError().GetSeal().GetDataKeyId() != stored.GetPayloadSeal().GetDataKeyId() {
		t.Fatalf("the filter verdicts as stored: %v", filtered)
	}

	opened, err := p.OpenEvent(ctx, stored)
	if err != nil || !proto.Equal(opened.GetSchemaViolation(), ev.GetSchemaViolation()) {
		t.Fatalf("the violation opened: %v, %v", opened.GetSchemaViolation(), err)
	}
	clear, erased, err := p.OpenFiltered(ctx, "acme", "evt_1", filtered)
	if err != nil || erased || !strings.Contains(clear[0].GetError(), secret) || clear[1].GetError() != "" {
		t.Fatalf("the filter errors opened: %v, erased %v, %v", clear, erased, err)
	}
	if _, _, err := p.OpenFiltered(ctx, "acme", "evt_2", filtered); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("a filter error copied to another event opened: %v", err)
	}

	marks.add(stored.GetPayloadSeal().GetDataKeyId())
	if err := p.Destroy(ctx, "acme", stored.GetPayloadSeal().GetDataKeyId()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.OpenEvent(ctx, stored); !errors.Is(err, seal.ErrErased) {
		t.Fatalf("the event after erasure: %v, want ErrErased", err)
	}
	clear, erased, err = p.OpenFiltered(ctx, "acme", "evt_1", filtered)
	if err != nil || !erased || clear[0].GetError() != seal.ErasedText {
		t.Fatalf("the filter errors after erasure: %v, erased %v, %v", clear, erased, err)
	}
	gone := seal.ErasedEvent(stored)
	if v := gone.GetSchemaViolation(); v.GetKeyword() != "additionalProperties" || v.GetMessage() != seal.ErasedText || v.GetSealed() != nil || gone.GetPayload() != nil {
		t.Fatalf("the erased event as shown: %v", gone)
	}
}

// TestSealUnderAnErasedKey: bytes drawn from a payload (a response to it)
// are sealed under the payload's own key, never under a newer one: once
// that key is erased they cannot be sealed at all, even after the tenant
// has a new key.
func TestSealUnderAnErasedKey(t *testing.T) {
	vault := memVault(t)
	marks := &erasedSet{ids: map[string]bool{}}
	p := seal.NewPayloads(vault, parsed(t, masterA), marks.erased)
	ctx := t.Context()
	stored, err := p.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_1", Payload: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	under := stored.GetPayloadSeal()
	if s, err := p.SealUnder(ctx, "acme", under, seal.ResponseAAD("acme", "dlv_1"), []byte("ok")); err != nil || s.GetSeal().GetDataKeyId() != under.GetDataKeyId() {
		t.Fatalf("sealed under %v, %v; want the payload's key", s.GetSeal(), err)
	}
	marks.add(under.GetDataKeyId())
	if err := p.Destroy(ctx, "acme", under.GetDataKeyId()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_2", Payload: []byte("{}")}); err != nil {
		t.Fatal(err) // the tenant has a new key now
	}
	if s, err := p.SealUnder(ctx, "acme", under, seal.ResponseAAD("acme", "dlv_1"), []byte("ok")); !errors.Is(err, seal.ErrErased) || s != nil {
		t.Fatalf("sealed under an erased key: %v, %v; want ErrErased", s, err)
	}
	if s, err := p.SealUnder(ctx, "acme", nil, nil, []byte("ok")); err != nil || s != nil {
		t.Fatalf("under a payload in clear: %v, %v; want nothing sealed", s, err)
	}
}
