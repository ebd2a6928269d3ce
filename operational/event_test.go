package operational_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/operational"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

var at = time.Date(2026, 12, 1, 9, 12, 4, 500_000_000, time.UTC)

func record(stream string, rev uint64, msg proto.Message) *events.Record {
	return &events.Record{
		Stream: stream, Revision: events.Revision(rev), ID: events.NewID("test", stream),
		Type: events.TypeOf(msg), Recorded: at.Add(time.Second),
	}
}

func attempt(n int32, class hooklinev1.ErrorClass, status int32) *hooklinev1.Attempt {
	return &hooklinev1.Attempt{
		TenantId: "acme", EndpointId: "ep_1", DeliveryId: "dlv_1", EventId: "inv_7", EventType: "invoice.paid",
		Number: n, HttpStatus: status, ErrorClass: class, Error: "boom", FinishedAt: timestamppb.New(at),
	}
}

// TestOf: each cause becomes its operational event, with the data a
// receiver needs; what is not a cause becomes none.
func TestOf(t *testing.T) {
	ts := timestamppb.New(at)
	cases := []struct {
		name     string
		msg      proto.Message
		wantType string // "" for none
		wantData map[string]any
	}{
		{name: "paused by a 410", msg: &hooklinev1.EndpointPaused{TenantId: "acme", EndpointId: "ep_1", Reason: hooklinev1.EndpointPaused_REASON_GONE, DeliveryId: "dlv_1", At: ts,
			IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "delivery"}},
			wantType: operational.EndpointPaused, wantData: map[string]any{"endpoint_id": "ep_1", "reason": "gone", "delivery_id": "dlv_1"}},
		{name: "paused by a person", msg: &hooklinev1.EndpointPaused{TenantId: "acme", EndpointId: "ep_1", Reason: hooklinev1.EndpointPaused_REASON_REQUESTED, At: ts,
			IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_API_KEY, Id: "key_1"}},
			wantType: operational.EndpointPaused, wantData: map[string]any{"endpoint_id": "ep_1", "reason": "requested", "paused_by": map[string]any{"kind": "api_key", "id": "key_1"}}},
		{name: "circuit opened", msg: &hooklinev1.CircuitOpened{TenantId: "acme", EndpointId: "ep_1", ConsecutiveFailures: 5, LastError: hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT,
			Until: timestamppb.New(at.Add(30 * time.Second)), CoolDownMs: 30000, At: ts},
			wantType: operational.CircuitOpened, wantData: map[string]any{"endpoint_id": "ep_1", "consecutive_failures": 5.0, "last_error_class": "timeout", "until": "2026-12-01T09:12:34.5Z", "cool_down_ms": 30000.0}},
		{name: "circuit closed", msg: &hooklinev1.CircuitClosed{TenantId: "acme", EndpointId: "ep_1", At: ts},
			wantType: operational.CircuitClosed, wantData: map[string]any{"endpoint_id": "ep_1"}},
		{name: "half open", msg: &hooklinev1.CircuitHalfOpened{TenantId: "acme", EndpointId: "ep_1", At: ts}},
		{name: "permanent failure", msg: &hooklinev1.AttemptFailed{Attempt: attempt(1, hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS, 400)},
			wantType: operational.DeliveryFailed, wantData: map[string]any{"endpoint_id": "ep_1", "delivery_id": "dlv_1", "event_id": "inv_7", "event_type": "invoice.paid",
				"reason": "permanent", "attempts": 1.0, "http_status": 400.0, "error_class": "http_status", "error": "boom"}},
		{name: "attempts exhausted", msg: &hooklinev1.AttemptFailed{Attempt: attempt(15, hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS, 503), Retryable: true},
			wantType: operational.AttemptsExhausted, wantData: map[string]any{"endpoint_id": "ep_1", "delivery_id": "dlv_1", "event_id": "inv_7", "event_type": "invoice.paid",
				"attempts": 15.0, "http_status": 503.0, "error_class": "http_status", "error": "boom"}},
		{name: "event gone", msg: &hooklinev1.AttemptFailed{Attempt: attempt(3, hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, 0)},
			wantType: operational.DeliveryFailed, wantData: map[string]any{"endpoint_id": "ep_1", "delivery_id": "dlv_1", "event_id": "inv_7", "event_type": "invoice.paid",
				"reason": "event_gone", "attempts": 2.0, "error_class": "internal", "error": "boom"}},
		{name: "expired", msg: &hooklinev1.DeliveryExpired{TenantId: "acme", EndpointId: "ep_1", DeliveryId: "dlv_1", EventId: "inv_7", Attempts: 4, At: ts},
			wantType: operational.DeliveryFailed, wantData: map[string]any{"endpoint_id": "ep_1", "delivery_id": "dlv_1", "event_id": "inv_7", "reason": "expired", "attempts": 4.0}},
		{name: "a retry is scheduled", msg: &hooklinev1.AttemptFailed{Attempt: attempt(2, hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT, 0), Retryable: true, NextAttemptAt: ts}},
		{name: "a manual attempt", msg: func() proto.Message {
			a := attempt(4, hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS, 500)
			a.Manual = true
			return &hooklinev1.AttemptFailed{Attempt: a, Retryable: true}
		}()},
		{name: "a delivery of an operational event", msg: func() proto.Message {
			a := attempt(1, hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS, 400)
			a.EventType = operational.CircuitOpened
			return &hooklinev1.AttemptFailed{Attempt: a}
		}()},
		{name: "the endpoint was deleted", msg: &hooklinev1.AttemptFailed{Attempt: attempt(1, hooklinev1.ErrorClass_ERROR_CLASS_ENDPOINT_GONE, 0)}},
		{name: "a success", msg: &hooklinev1.AttemptSucceeded{Attempt: attempt(1, 0, 200)}},
		{name: "recovery finished", msg: &hooklinev1.RecoveryFinished{TenantId: "acme", EndpointId: "ep_1", RecoveryId: "rcv_1", Reason: hooklinev1.RecoveryFinished_REASON_ENDPOINT_NOT_ACTIVE, Found: 9, Requested: 4, At: ts},
			wantType: operational.RecoveryFinished, wantData: map[string]any{"endpoint_id": "ep_1", "recovery_id": "rcv_1", "reason": "endpoint_not_active", "found": 9.0, "requested": 4.0}},
		{name: "rotation started", msg: &hooklinev1.SecretRotated{TenantId: "acme", EndpointId: "ep_1", Secret: &hooklinev1.SealedSecret{Version: 2, Ciphertext: []byte("sealed")}, PreviousVersion: 1,
			PreviousExpiresAt: timestamppb.New(at.Add(24 * time.Hour)), At: ts},
			wantType: operational.RotationStarted, wantData: map[string]any{"endpoint_id": "ep_1", "version": 2.0, "previous_version": 1.0, "previous_expires_at": "2026-12-02T09:12:04.5Z"}},
		{name: "rotation ended", msg: &hooklinev1.SecretRetired{TenantId: "acme", EndpointId: "ep_1", Version: 1, Reason: hooklinev1.SecretRetired_REASON_OVERLAP_ENDED, At: ts},
			wantType: operational.RotationEnded, wantData: map[string]any{"endpoint_id": "ep_1", "version": 1.0, "reason": "overlap_ended"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := record("endpoint-ep_1", 4, c.msg)
			ev, ok := operational.Of(rec, c.msg)
			if c.wantType == "" {
				if ok {
					t.Fatalf("got %s %s, want none", ev.Type, ev.Payload)
				}
				return
			}
			if !ok || ev.Type != c.wantType || ev.TenantID != "acme" || ev.EndpointID != "ep_1" || !ev.OccurredAt.Equal(at) {
				t.Fatalf("got %v, %+v", ok, ev)
			}
			if want := operational.EventID(rec.ID); ev.ID != want || !strings.HasPrefix(ev.ID, operational.IDPrefix) {
				t.Fatalf("id %s, want %s", ev.ID, want)
			}
			var body map[string]any
			if err := json.Unmarshal(ev.Payload, &body); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"type": c.wantType, "timestamp": "2026-12-01T09:12:04.5Z", "data": c.wantData,
				"cause": map[string]any{"stream": "endpoint-ep_1", "revision": 4.0, "event": rec.Type},
			}
			if d := cmp.Diff(want, body); d != "" {
				t.Fatalf("payload (-want +got):\n%s", d)
			}
			if bytes.Contains(ev.Payload, []byte("sealed")) || bytes.Contains(ev.Payload, []byte("c2VhbGVk")) {
				t.Fatalf("the payload carries the sealed secret: %s", ev.Payload)
			}
			// Emitting again gives the same event: same id, same bytes.
			again, _ := operational.Of(rec, proto.Clone(c.msg))
			if again.ID != ev.ID || !bytes.Equal(again.Payload, ev.Payload) {
				t.Fatalf("not deterministic:\n%s\n%s", ev.Payload, again.Payload)
			}
		})
	}
}

// TestCheckSubscription: an operational endpoint names only operational
// types, known ones or "hookline.*".
func TestCheckSubscription(t *testing.T) {
	cases := []struct {
		name  string
		types []string
		want  string // part of the error; "" for none
	}{
		{name: "business types", types: []string{"invoice.paid", "*"}},
		{name: "operational types", types: []string{operational.EndpointPaused, operational.CircuitOpened}},
		{name: "all operational types", types: []string{operational.All}},
		{name: "mixed", types: []string{operational.EndpointPaused, "invoice.paid"}, want: `mixes Hookline's operational event types`},
		{name: "mixed with every type", types: []string{"*", operational.All}, want: `"*"`},
		{name: "unknown", types: []string{"hookline.endpoint.pausd"}, want: `"hookline.endpoint.pausd" is not an operational event type`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := operational.CheckSubscription(c.types)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("got %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestTypes: every type is documented with an example payload of its own
// type, as JSON.
func TestTypes(t *testing.T) {
	seen := map[string]bool{}
	for _, ty := range operational.Types() {
		if !strings.HasPrefix(ty.Name, operational.Prefix) || !operational.Known(ty.Name) || seen[ty.Name] || ty.Description == "" {
			t.Fatalf("type %+v", ty)
		}
		seen[ty.Name] = true
		var body struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(ty.Example, &body); err != nil || body.Type != ty.Name || body.Data["endpoint_id"] == nil {
			t.Fatalf("example of %s: %s (%v)", ty.Name, ty.Example, err)
		}
	}
	if len(seen) != 8 {
		t.Fatalf("%d types", len(seen))
	}
}
