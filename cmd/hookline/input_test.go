package main_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// TestBadInputRefused drives `hookline serve` with input that used to be
// accepted although it could never be delivered or should never be
// stored. Each is refused with INVALID_ARGUMENT naming the field, and the
// log holds nothing of any of them: only what the valid setup wrote.
func TestBadInputRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	data := t.TempDir()
	n := startNode(t, data)
	admin := n.as(t, adminToken)
	for _, id := range []string{"acme", "globex"} {
		must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: id, Name: id}))
	}
	acme := n.as(t, must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})).GetApiKey())
	globex := n.as(t, must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "globex"})).GetApiKey())
	settings := &controlv1.EndpointSettings{Url: "http://127.0.0.1:9/in", EventTypes: []string{"order.paid"}}

	// Endpoint ids: two tenants choosing one name each get an endpoint of
	// their own, neither learns that the other uses it, and a repeat is
	// refused only for the tenant's own endpoint.
	var mine []string
	t.Run("chosen endpoint ids are scoped to the tenant", func(t *testing.T) {
		a := must(acme.endpoints().CreateEndpoint(acme.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "orders", Settings: settings}))
		g := must(globex.endpoints().CreateEndpoint(globex.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "orders", Settings: settings}))
		aID, gID := a.GetEndpoint().GetEndpointId(), g.GetEndpoint().GetEndpointId()
		mine = append(mine, aID, gID)
		if aID == gID || !strings.HasPrefix(aID, "orders_") || !strings.HasPrefix(gID, "orders_") {
			t.Fatalf("acme got %q, globex got %q: want two different ids that start with orders_", aID, gID)
		}
		_, err := acme.endpoints().CreateEndpoint(acme.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "orders", Settings: settings})
		wantCode(t, err, codes.AlreadyExists)
		_, err = globex.endpoints().GetEndpoint(globex.ctx(), &controlv1.GetEndpointRequest{EndpointId: aID})
		wantCode(t, err, codes.NotFound)
		// Creating with the other tenant's full id scopes it again: a new
		// endpoint of globex's, not a collision with acme's.
		again := must(globex.endpoints().CreateEndpoint(globex.ctx(), &controlv1.CreateEndpointRequest{EndpointId: aID, Settings: settings}))
		if id := again.GetEndpoint().GetEndpointId(); id == aID || !strings.HasPrefix(id, aID+"_") {
			t.Fatalf("globex creating %q got %q", aID, id)
		} else {
			mine = append(mine, id)
		}
	})

	long := "http://127.0.0.1:9/" + strings.Repeat("a", 100_000)
	bad := []struct {
		name  string
		field string
		call  func() error
	}{
		{"schema_version with a control character", "schema_version", func() error {
			_, err := acme.events().Publish(acme.ctx(), &controlv1.PublishRequest{EventId: "e1", Type: "order.paid", SchemaVersion: "v1\x01", Payload: []byte(`{}`)})
			return err
		}},
		{"schema_version with a space", "schema_version", func() error {
			_, err := acme.events().Publish(acme.ctx(), &controlv1.PublishRequest{EventId: "e2", Type: "order.paid", SchemaVersion: "v 1", Payload: []byte(`{}`)})
			return err
		}},
		{"object_id with a newline", "object_id", func() error {
			_, err := acme.events().Publish(acme.ctx(), &controlv1.PublishRequest{EventId: "e3", Type: "order.paid", ObjectId: "o\n1", Payload: []byte(`{}`)})
			return err
		}},
		{"content_type with a control character", "content_type", func() error {
			_, err := acme.events().Publish(acme.ctx(), &controlv1.PublishRequest{EventId: "e4", Type: "order.paid", ContentType: "text/plain\x7f", Payload: []byte(`{}`)})
			return err
		}},
		{"100,000-character endpoint URL", "settings.url", func() error {
			_, err := acme.endpoints().CreateEndpoint(acme.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: long, EventTypes: []string{"a.b"}}})
			return err
		}},
		{"100,000-character URL in an update", "settings.url", func() error {
			_, err := acme.endpoints().UpdateEndpoint(acme.ctx(), &controlv1.UpdateEndpointRequest{EndpointId: mine[0],
				Settings: &controlv1.EndpointSettings{Url: long}, UpdateMask: fieldMask("url")})
			return err
		}},
		{"batch event naming another tenant", "events[1].tenant_id", func() error {
			_, err := acme.events().PublishBatch(acme.ctx(), &controlv1.PublishBatchRequest{Events: []*controlv1.PublishRequest{
				{EventId: "b1", Type: "order.paid", Payload: []byte(`{}`)},
				{EventId: "b2", Type: "order.paid", Payload: []byte(`{}`), TenantId: "globex"},
			}})
			return err
		}},
		{"admin batch event naming another tenant", "events[0].tenant_id", func() error {
			_, err := admin.events().PublishBatch(admin.ctx(), &controlv1.PublishBatchRequest{TenantId: "acme", Events: []*controlv1.PublishRequest{
				{EventId: "b3", Type: "order.paid", Payload: []byte(`{}`), TenantId: "globex"},
			}})
			return err
		}},
		{"admin tenant_id with a dot", "tenant_id", func() error {
			// Tenant "a.b" with event "c" would share event-a.b.c with
			// tenant "a" and event "b.c".
			_, err := admin.events().Publish(admin.ctx(), &controlv1.PublishRequest{TenantId: "acme.x", EventId: "c", Type: "order.paid", Payload: []byte(`{}`)})
			return err
		}},
		{"admin tenant_id with a dash", "tenant_id", func() error {
			_, err := admin.endpoints().ListEndpoints(admin.ctx(), &controlv1.ListEndpointsRequest{TenantId: "ac-me"})
			return err
		}},
		{"chosen endpoint id too long to scope", "endpoint_id", func() error {
			_, err := acme.endpoints().CreateEndpoint(acme.ctx(), &controlv1.CreateEndpointRequest{EndpointId: strings.Repeat("e", 60), Settings: settings})
			return err
		}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			wantField(t, tt.call(), codes.InvalidArgument, tt.field)
		})
	}

	t.Run("REST parse errors name the field", func(t *testing.T) {
		tests := []struct {
			name, path string
			body       any
			want       string
		}{
			{"bytes not base64", "/v1/events", map[string]any{"event_id": "r1", "type": "order.paid", "payload": "!!"}, "payload: is not a base64 string"},
			{"string given a number", "/v1/events", map[string]any{"event_id": 7, "type": "order.paid", "data": 1}, "event_id: is not a JSON string"},
			{"unknown field", "/v1/events", map[string]any{"event_id": "r2", "type": "order.paid", "data": 1, "colour": "red"}, `colour: is not a field of this request`},
			{"bad timestamp", "/v1/events", map[string]any{"event_id": "r3", "type": "order.paid", "data": 1, "occurred_at": "yesterday"}, "occurred_at: is not an RFC 3339 time"},
			{"number for a string in a batch", "/v1/events/batch", map[string]any{"events": []any{map[string]any{"event_id": "r4", "type": 5, "data": 1}}}, "type: is not a JSON string"},
			{"not JSON", "/v1/webhook-endpoints", "{", "body: is not valid JSON"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				code, raw := acme.restRaw("POST", tt.path, tt.body)
				if code != 400 || !strings.Contains(raw, tt.want) || strings.Contains(raw, "proto:") {
					t.Fatalf("POST %s %v -> %d %s; want 400 with %q", tt.path, tt.body, code, raw, tt.want)
				}
			})
		}
	})

	n.stop(t)
	// The log holds the setup only: two tenants (created, key issued), the
	// endpoints and the node's master key registration. No event stream,
	// no other endpoint or tenant.
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(data, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recs, err := l.ReadAll(context.Background(), events.Start, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	var streams []string
	for _, r := range recs {
		if !slices.Contains(streams, r.Stream) {
			streams = append(streams, r.Stream)
		}
	}
	slices.Sort(streams)
	// The node's own: the master key's registry and the partition table.
	want := []string{events.TenantStream("acme"), events.TenantStream("globex"), seal.RegistryStream, events.OwnersStream}
	for _, id := range mine {
		want = append(want, events.EndpointStream(id))
	}
	slices.Sort(want)
	if !slices.Equal(streams, want) {
		t.Fatalf("the log holds streams %v, want only %v", streams, want)
	}
	if len(recs) != 9 {
		t.Fatalf("the log holds %d events, want 9 (2 × TenantCreated + ApiKeyIssued, 3 × EndpointCreated, MasterKeyRegistered, PartitionsAssigned)", len(recs))
	}
}

// wantField fails unless err has code and its message starts with field.
func wantField(t *testing.T, err error, code codes.Code, field string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.HasPrefix(st.Message(), field+": ") {
		t.Fatalf("got %v, want %v naming %s", err, code, field)
	}
}

// restRaw calls the REST API with body (a string is sent as it is, other
// values as JSON) and returns the status and the answer's text.
func (a *api) restRaw(method, path string, body any) (int, string) {
	a.t.Helper()
	var raw string
	switch b := body.(type) {
	case string:
		raw = b
	default:
		raw = mustJSON(a.t, b)
	}
	code, answer, err := a.do(method, path, strings.NewReader(raw), int64(len(raw)))
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, answer
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
