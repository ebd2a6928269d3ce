package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// restGet calls GET path on the node's REST listener with token and
// decodes the JSON answer into a map; it fails the test unless 200.
func (n *e2eNode) restGet(t *testing.T, token, path string) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+n.srv.HTTPAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
	return out
}

// TestFilterAndRoutingExplanation: a filter is checked at create (its
// error names the position), excludes an event at publish (the plan
// records it as filtered, nothing reaches the endpoint), and the routing
// call explains every endpoint's verdict from the log, with the values the
// filter saw; changing the filter afterwards changes nothing of the
// explanation. Reconcile counts the filtered endpoint as filtered, not
// missing.
func TestFilterAndRoutingExplanation(t *testing.T) {
	n := startE2E(t, node.Config{})
	rc := newHookReceiver(t, nil)
	c := n.tenant(t, "acme", nil)
	const bigFilter = `data.amount >= 1000 && headers["x-region"] == "eu"`

	t.Run("a bad filter is refused with its position", func(t *testing.T) {
		_, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
			Url: rc.url("/bad"), EventTypes: []string{"invoice.paid"}, Filter: "data.amount >= ",
		}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "settings.filter") || !strings.Contains(err.Error(), "line 1, column 16") {
			t.Fatalf("create with a bad filter: %v; want INVALID_ARGUMENT naming settings.filter at line 1, column 16", err)
		}
		_, err = c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
			Url: rc.url("/bad"), EventTypes: []string{"invoice.paid"}, Filter: `data.items.exists(i, data.items.exists(j, i == j))`,
		}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "over the limit") {
			t.Fatalf("create with a costly filter: %v; want INVALID_ARGUMENT over the cost limit", err)
		}
	})

	c.endpoint(t, rc, "big", []string{"invoice.paid"}, func(s *controlv1.EndpointSettings) { s.Filter = bigFilter }, answer(http.StatusOK))
	c.endpoint(t, rc, "all", []string{"*"}, nil, answer(http.StatusOK))
	c.endpoint(t, rc, "orders", []string{"order.shipped"}, nil, answer(http.StatusOK))
	c.endpoint(t, rc, "held", []string{"invoice.paid"}, nil, answer(http.StatusOK))
	c.endpoint(t, rc, "gone", []string{"invoice.paid"}, nil, answer(http.StatusOK))
	id := func(name string) string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ids[name]
	}
	if _, err := c.endpoints.PauseEndpoint(c.ctx(), &controlv1.PauseEndpointRequest{EndpointId: id("held")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.endpoints.DeleteEndpoint(c.ctx(), &controlv1.DeleteEndpointRequest{EndpointId: id("gone")}); err != nil {
		t.Fatal(err)
	}

	pub, err := c.events.Publish(c.ctx(), &controlv1.PublishRequest{
		EventId: "inv_small", Type: "invoice.paid", Payload: []byte(`{"invoice":"1","amount":50}`),
		Headers: map[string]string{"X-Region": "eu"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.remember(pub)
	t.Run("the publish plans around the filter", func(t *testing.T) {
		planned := map[string]bool{}
		for _, d := range pub.GetDeliveries() {
			planned[d.GetEndpointId()] = true
		}
		if len(planned) != 2 || !planned[id("all")] || !planned[id("held")] {
			t.Errorf("planned %v; want all and held", planned)
		}
		if f := pub.GetFiltered(); len(f) != 1 || f[0].GetEndpointId() != id("big") || f[0].GetConfigVersion() != 1 {
			t.Errorf("filtered %v; want big at config version 1", f)
		}
	})
	c.endpoint(t, rc, "late", []string{"invoice.paid"}, nil, answer(http.StatusOK))

	// The filter changes after the publish: the explanation still shows
	// the filter the publish used and the values it saw.
	if _, err := c.endpoints.UpdateEndpoint(c.ctx(), &controlv1.UpdateEndpointRequest{
		EndpointId: id("big"), Settings: &controlv1.EndpointSettings{Filter: "true"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"filter"}},
	}); err != nil {
		t.Fatal(err)
	}

	t.Run("routing explains every endpoint from the log", func(t *testing.T) {
		r, err := c.events.ExplainRouting(c.ctx(), &controlv1.ExplainRoutingRequest{EventId: "inv_small"})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetHeaders()["x-region"] != "eu" {
			t.Errorf("headers %v; want x-region=eu (lower-cased)", r.GetHeaders())
		}
		got := map[string]*controlv1.RoutingVerdict{}
		for _, v := range r.GetEndpoints() {
			got[v.GetEndpointId()] = v
		}
		want := map[string]controlv1.RoutingVerdict_Verdict{
			"big": controlv1.RoutingVerdict_VERDICT_FILTERED_OUT, "all": controlv1.RoutingVerdict_VERDICT_PLANNED,
			"orders": controlv1.RoutingVerdict_VERDICT_NOT_SUBSCRIBED, "held": controlv1.RoutingVerdict_VERDICT_PAUSED,
			"gone": controlv1.RoutingVerdict_VERDICT_DELETED, "late": controlv1.RoutingVerdict_VERDICT_CREATED_LATER,
		}
		if len(got) != len(want) {
			t.Errorf("%d verdicts; want %d: %v", len(got), len(want), r.GetEndpoints())
		}
		for name, verdict := range want {
			v := got[id(name)]
			if v.GetVerdict() != verdict {
				t.Errorf("%s: %v (%s); want %v", name, v.GetVerdict(), v.GetReason(), verdict)
			}
		}
		big := got[id("big")]
		if big.GetFilter() != bigFilter || big.GetConfigVersion() != 1 {
			t.Errorf("big: filter %q at v%d; want the publish's filter %q at v1", big.GetFilter(), big.GetConfigVersion(), bigFilter)
		}
		if vals := big.GetFilterValues(); len(vals) != 1 || vals[0].GetExpr() != "data.amount" || vals[0].GetValue().GetNumberValue() != 50 {
			t.Errorf("big: the filter saw %v; want data.amount = 50 alone (&& stopped there)", vals)
		}
		if all := got[id("all")]; all.GetDeliveryId() != events.DeliveryID("acme", "inv_small", id("all")) || all.GetConfigVersion() != 1 {
			t.Errorf("all: delivery %s at v%d", all.GetDeliveryId(), all.GetConfigVersion())
		}
		if o := got[id("orders")]; !strings.Contains(o.GetReason(), "order.shipped") {
			t.Errorf("orders: reason %q; want it to name its types", o.GetReason())
		}
	})

	t.Run("over REST", func(t *testing.T) {
		r := n.restGet(t, c.key, "/v1/events/inv_small/routing")
		eps, _ := r["endpoints"].([]any)
		found := false
		for _, e := range eps {
			m := e.(map[string]any)
			if m["endpoint_id"] == id("big") && m["verdict"] == "VERDICT_FILTERED_OUT" {
				found = true
			}
		}
		if !found {
			t.Errorf("REST routing: no FILTERED_OUT verdict for big in %v", r)
		}
	})

	t.Run("an event that passes the new filter reaches the endpoint", func(t *testing.T) {
		planned := c.publish(t, "inv_big", "invoice.paid")
		want := events.DeliveryID("acme", "inv_big", id("big"))
		found := false
		for _, d := range planned {
			found = found || d == want
		}
		if !found {
			t.Fatalf("inv_big planned %v; want big among them", planned)
		}
		c.waitDelivery(t, want, "succeeded", hasStatus("succeeded"))
		if got := rc.count(events.DeliveryID("acme", "inv_small", id("big"))); got != 0 {
			t.Errorf("the filtered-out event reached big %d times", got)
		}
	})

	t.Run("reconcile reads filtered, not missing", func(t *testing.T) {
		// held is paused: its delivery waits, pending, which is clean.
		rep := n.reconcile(t, &controlv1.ReconcileRequest{})
		if !rep.GetClean() {
			t.Fatalf("reconcile not clean: %v", kinds(rep))
		}
		for _, tc := range rep.GetTenants() {
			if tc.GetTenantId() == "acme" && tc.GetFiltered() != 1 {
				t.Errorf("acme filtered %d; want 1", tc.GetFiltered())
			}
		}
	})
}
