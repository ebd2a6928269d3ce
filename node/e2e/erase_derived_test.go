package e2e_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestErasureTakesWhatQuotesThePayload: a schema violation under warn and
// a filter's error quote the payload's values; they are read back (a
// duplicate's answer, the routing explanation, the audit views) until the
// tenant is erased, and after it no answer and no record of the log holds
// the value in clear: a duplicate's answer says erased, the audit views
// show "erased" in their place.
func TestErasureTakesWhatQuotesThePayload(t *testing.T) {
	n := startE2E(t, node.Config{})
	rc := newHookReceiver(t, nil)
	gone := n.tenant(t, "gone", nil)
	if code, got := n.rest(t, http.MethodPut, gone.key, "/v1/event-types/order.paid", map[string]any{
		"schema": map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string", "pattern": "^ok$"}}},
	}); code != http.StatusOK {
		t.Fatalf("PUT the event type: %d %v", code, got)
	}
	if code, got := n.rest(t, http.MethodPatch, gone.key, "/v1/tenants/gone", map[string]any{"schema_enforcement": "warn"}); code != http.StatusOK {
		t.Fatalf("PATCH schema_enforcement: %d %v", code, got)
	}
	gone.endpoint(t, rc, "gone_dated", []string{"order.paid"}, func(s *controlv1.EndpointSettings) {
		s.Filter = `timestamp(data.note) > timestamp("2020-01-01T00:00:00Z")`
	}, answer(http.StatusOK))

	body := map[string]any{"event_id": "evt_quoted", "type": "order.paid", "data": map[string]any{"note": erasedMarker}}
	code, first := n.rest(t, http.MethodPost, gone.key, "/v1/events", body)
	if code != http.StatusOK || !strings.Contains(jsonText(t, first["schema_violation"]), erasedMarker) || !strings.Contains(jsonText(t, first["filtered"]), erasedMarker) {
		t.Fatalf("the publish: %d %v; want its violation and its filter's error, quoting the value", code, first)
	}
	code, again := n.rest(t, http.MethodPost, gone.key, "/v1/events", body)
	if code != http.StatusOK || again["duplicate"] != true || !strings.Contains(jsonText(t, again), erasedMarker) {
		t.Fatalf("the duplicate before erasure: %d %v; want the recorded violation and filter error", code, again)
	}
	if why := n.restGet(t, gone.key, "/v1/events/evt_quoted/routing"); !strings.Contains(jsonText(t, why), erasedMarker) {
		t.Fatalf("the routing explanation before erasure: %v; want the filter's error", why)
	}
	stream := events.EventStream("gone", "evt_quoted")
	if _, audit := n.rest(t, http.MethodGet, e2eAdmin, "/v1/audit/streams/"+stream, nil); !strings.Contains(jsonText(t, audit), erasedMarker) {
		t.Fatalf("the audit view before erasure: %v; want the violation and the filter's error opened", audit)
	}

	if code, got := n.rest(t, http.MethodPost, e2eAdmin, "/v1/tenants/gone/erase", map[string]any{"confirm": "gone"}); code != http.StatusOK {
		t.Fatalf("erase: %d %v", code, got)
	}
	noValue := func(what string, v any) {
		t.Helper()
		if text := jsonText(t, v); strings.Contains(text, erasedMarker) {
			t.Fatalf("%s after erasure shows the erased value: %s", what, text)
		}
	}
	code, again = n.rest(t, http.MethodPost, gone.key, "/v1/events", body)
	noValue("the duplicate's answer", again)
	if code != http.StatusOK || again["duplicate"] != true || again["erased"] != true {
		t.Fatalf("the duplicate after erasure: %d %v; want a duplicate that says erased", code, again)
	}
	if v, _ := again["schema_violation"].(map[string]any); v["keyword"] != "pattern" || v["message"] != "erased" {
		t.Fatalf("the duplicate's violation after erasure: %v; want its rule, and erased in place of its message", v)
	}
	code, audit := n.rest(t, http.MethodGet, e2eAdmin, "/v1/audit/streams/"+stream, nil)
	noValue("the audit view of the event's stream", audit)
	if code != http.StatusOK || !strings.Contains(jsonText(t, audit), `"message":"erased"`) || !strings.Contains(jsonText(t, audit), `"error":"erased"`) {
		t.Fatalf("the audit view after erasure: %d %v; want erased in place of the violation's message and the filter's error", code, audit)
	}
	_, category := n.rest(t, http.MethodGet, e2eAdmin, "/v1/audit/categories/event", nil)
	noValue("the audit view of the event category", category)
	if code, why := n.rest(t, http.MethodGet, gone.key, "/v1/events/evt_quoted/routing", nil); code != http.StatusGone {
		t.Fatalf("the routing explanation after erasure: %d %v; want 410", code, why)
	}
	for _, r := range logRecordsOf(t, n) {
		if bytes.Contains(r.Data, []byte(erasedMarker)) || bytes.Contains(r.Metadata, []byte(erasedMarker)) {
			t.Fatalf("the log's %s %s holds the value in clear", r.Stream, r.Type)
		}
	}
}

// jsonText is v as JSON, for looking for a value anywhere in an answer.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
