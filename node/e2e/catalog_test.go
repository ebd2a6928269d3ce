package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// rest calls method path on the node's REST listener with token and the
// JSON of body (nil: none), and returns the status and the decoded answer.
func (n *e2eNode) rest(t *testing.T, method, token, path string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+n.srv.HTTPAddr()+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, path, resp.StatusCode, got)
	}
	return resp.StatusCode, out
}

const paidSchema = `{"type":"object","required":["order","total"],"properties":{"order":{"type":"string"},"total":{"type":"number","minimum":0}}}`

// TestEventCatalog defines an event type with a schema over REST, lists
// it, and publishes against it under each schema_enforcement: off accepts
// anything; warn accepts a bad payload and says why, recorded and
// counted; reject refuses it naming the field and the rule, and accepts a
// good one.
func TestEventCatalog(t *testing.T) {
	n := startE2E(t, node.Config{})
	c := n.tenant(t, "acme", nil)
	var schema map[string]any
	if err := json.Unmarshal([]byte(paidSchema), &schema); err != nil {
		t.Fatal(err)
	}
	put := func(body map[string]any) (int, map[string]any) {
		return n.rest(t, http.MethodPut, c.key, "/v1/event-types/order.paid", body)
	}
	code, got := put(map[string]any{"description": "An order was paid.", "example": map[string]any{"order": "ord_1", "total": 12.5}, "schema": schema})
	if code != http.StatusOK || got["version"] != 1.0 || got["event_type"] != "order.paid" {
		t.Fatalf("PUT: %d %v", code, got)
	}
	if code, got := put(map[string]any{"example": map[string]any{"order": "ord_1", "total": -1}, "schema": schema}); code != http.StatusBadRequest || !strings.Contains(got["message"].(string), "example") {
		t.Fatalf("an example that breaks its schema: %d %v", code, got)
	}
	if code, got := put(map[string]any{"schema": map[string]any{"$ref": "https://example.com/s.json"}}); code != http.StatusBadRequest || !strings.Contains(got["message"].(string), "another document") {
		t.Fatalf("a schema that refers out: %d %v", code, got)
	}
	if _, got := put(map[string]any{"description": "An order was paid.", "example": map[string]any{"order": "ord_1", "total": 12.5}, "schema": schema}); got["version"] != 1.0 {
		t.Fatalf("the same definition again: %v, want version 1 still", got)
	}
	between := time.Now()
	if _, got := put(map[string]any{"description": "An order was paid in full.", "example": map[string]any{"order": "ord_1", "total": 12.5}, "schema": schema}); got["version"] != 2.0 {
		t.Fatalf("a new description: %v, want version 2", got)
	}
	code, list := n.rest(t, http.MethodGet, c.key, "/v1/event-types", nil)
	if types, _ := list["event_types"].([]any); code != http.StatusOK || len(types) != 1 || list["schema_enforcement"] != "off" {
		t.Fatalf("GET /v1/event-types: %d %v", code, list)
	}

	then, err := c.catalog.ListEventTypes(c.ctx(), &controlv1.ListEventTypesRequest{AsOf: between.Format(time.RFC3339Nano)})
	if err != nil || len(then.GetEventTypes()) != 1 || then.GetEventTypes()[0].GetVersion() != 1 || then.GetAsOf() == nil {
		t.Fatalf("the catalog as of before version 2: %v, %v", then, err)
	}
	code, doc := n.rest(t, http.MethodGet, c.key, "/v1/event-types:export", nil)
	openapi, _ := doc["document"].(map[string]any)
	hooks, _ := openapi["webhooks"].(map[string]any)
	paid, _ := hooks["order.paid"].(map[string]any)
	if code != http.StatusOK || openapi["openapi"] != "3.1.0" || paid["post"] == nil {
		t.Fatalf("export as OpenAPI: %d %v", code, doc)
	}
	code, doc = n.rest(t, http.MethodGet, c.key, "/v1/event-types:export?format=jsonschema", nil)
	defs, _ := doc["document"].(map[string]any)["$defs"].(map[string]any)
	if paidSchema, _ := defs["order.paid"].(map[string]any); code != http.StatusOK || paidSchema["required"] == nil {
		t.Fatalf("export as JSON Schema: %d %v", code, doc)
	}

	bad, _ := structpb.NewStruct(map[string]any{"order": "ord_2", "total": -3})
	good, _ := structpb.NewStruct(map[string]any{"order": "ord_3", "total": 3})
	publish := func(id string, data *structpb.Struct) (*controlv1.PublishResponse, error) {
		return c.events.Publish(c.ctx(), &controlv1.PublishRequest{EventId: id, Type: "order.paid", Data: structpb.NewStructValue(data)})
	}
	if r, err := publish("off_bad", bad); err != nil || r.GetSchemaViolation() != nil {
		t.Fatalf("off, a bad payload: %v, %v; want accepted unchecked", r, err)
	}

	enforce := func(mode string) {
		t.Helper()
		code, got := n.rest(t, http.MethodPatch, c.key, "/v1/tenants/acme", map[string]any{"schema_enforcement": mode})
		if s, _ := got["settings"].(map[string]any); code != http.StatusOK || s["schema_enforcement"] != mode {
			t.Fatalf("PATCH schema_enforcement %s: %d %v", mode, code, got)
		}
	}
	enforce("warn")
	r, err := publish("warn_bad", bad)
	if v := r.GetSchemaViolation(); err != nil || v.GetPointer() != "/total" || v.GetKeyword() != "minimum" || v.GetSchemaVersion() != 2 {
		t.Fatalf("warn, a bad payload: %v, %v; want accepted, with the violation at /total (minimum) of schema version 2", r, err)
	}
	if again, err := publish("warn_bad", bad); err != nil || !again.GetDuplicate() || again.GetSchemaViolation().GetPointer() != "/total" {
		t.Fatalf("warn, the same event again: %v, %v; want the duplicate's answer with its recorded violation", again, err)
	}
	why, err := c.events.ExplainRouting(c.ctx(), &controlv1.ExplainRoutingRequest{EventId: "warn_bad"})
	if s := why.GetSchema(); err != nil || s.GetSchemaVersion() != 2 || s.GetEnforcement() != "warn" || s.GetViolation().GetPointer() != "/total" {
		t.Fatalf("the routing explanation's schema: %v, %v; want version 2 under warn, the violation at /total", s, err)
	}
	if got := n.metric(t, "hookline_schema_violations_total"); got != 1 {
		t.Errorf("publishes counted as violations: %v, want 1 (warned)", got)
	}

	enforce("reject")
	_, err = publish("reject_bad", bad)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/total") || !strings.Contains(err.Error(), "minimum") {
		t.Fatalf("reject, a bad payload: %v; want INVALID_ARGUMENT naming /total and minimum", err)
	}
	if r, err := publish("reject_good", good); err != nil || r.GetSchemaViolation() != nil {
		t.Fatalf("reject, a good payload: %v, %v", r, err)
	}
	if _, err := c.events.Publish(c.ctx(), &controlv1.PublishRequest{EventId: "other_type", Type: "order.shipped", Data: structpb.NewStructValue(bad)}); err != nil {
		t.Fatalf("reject, a type without a schema: %v; want accepted", err)
	}
	if got := n.metric(t, "hookline_schema_violations_total"); got != 2 {
		t.Errorf("publishes counted as violations: %v, want 2 (one warned, one refused)", got)
	}
}
