package e2e_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestWildcardSubscriptions: an endpoint subscribed with order.* gets
// every order type at any depth and nothing else; a pattern and a name
// that both match plan one delivery; a pattern that is not one is refused
// naming the entry; a publish or a catalog type that is a pattern is
// refused; the routing explanation names the entry that matched; a
// changed pattern plans by the new one from then on; reconcile, which
// rebuilds the subscriptions from the log by the same rule, is clean.
func TestWildcardSubscriptions(t *testing.T) {
	n := startE2E(t, node.Config{})
	rc := newHookReceiver(t, nil)
	c := n.tenant(t, "acme", nil)
	ok := answer(http.StatusOK)

	t.Run("entries that are not patterns are refused naming them", func(t *testing.T) {
		for _, bad := range []string{"order*", "*.paid", "order.*.added", ".*", "order.>"} {
			_, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
				Url: rc.url("/bad"), EventTypes: []string{"invoice.paid", bad},
			}})
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "settings.event_types[1]: ") {
				t.Errorf("event type %q: %v; want INVALID_ARGUMENT naming settings.event_types[1]", bad, err)
			}
		}
	})

	c.endpoint(t, rc, "orders", []string{"order.*"}, nil, ok)
	c.endpoint(t, rc, "items", []string{"order.item.*", "order.item.added"}, nil, ok)
	c.endpoint(t, rc, "all", []string{"*"}, nil, ok)
	c.endpoint(t, rc, "invoices", []string{"invoice.paid"}, nil, ok)
	id := func(name string) string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.ids[name]
	}
	plannedTo := func(eventID, typ string) []string {
		t.Helper()
		var names []string
		for _, d := range c.publish(t, eventID, typ) {
			names = append(names, c.plannedIDs()[d])
		}
		slices.Sort(names)
		return names
	}

	t.Run("patterns plan at any depth, and only under their prefix", func(t *testing.T) {
		for _, tt := range []struct {
			event, typ string
			want       []string
		}{
			{"o1", "order.paid", []string{"all", "orders"}},
			{"o2", "order.item.added", []string{"all", "items", "orders"}},
			{"o3", "order", []string{"all"}},
			{"o4", "orders.paid", []string{"all"}},
			{"i1", "invoice.paid", []string{"all", "invoices"}},
		} {
			if got := plannedTo(tt.event, tt.typ); !slices.Equal(got, tt.want) {
				t.Errorf("%s (%s) planned to %v; want %v", tt.event, tt.typ, got, tt.want)
			}
		}
		c.waitDelivery(t, events.DeliveryID("acme", "o2", id("items")), "succeeded", hasStatus("succeeded"))
		c.waitDelivery(t, events.DeliveryID("acme", "o2", id("orders")), "succeeded", hasStatus("succeeded"))
	})

	t.Run("a pattern is no event's type", func(t *testing.T) {
		_, err := c.events.Publish(c.ctx(), &controlv1.PublishRequest{EventId: "p1", Type: "order.*", Payload: []byte(`{}`)})
		if msg := status.Convert(err).Message(); status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(msg, "type: ") || !strings.Contains(msg, "is a pattern") {
			t.Errorf("publish of type order.*: %v; want INVALID_ARGUMENT naming type, saying it is a pattern", err)
		}
		code, got := n.rest(t, http.MethodPut, c.key, "/v1/event-types/order.*", map[string]any{"description": "every order event"})
		if msg, _ := got["message"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, "event_type: ") || !strings.Contains(msg, "is a pattern") {
			t.Errorf("catalog type order.*: %d %v; want 400 naming event_type, saying it is a pattern", code, got)
		}
	})

	t.Run("routing names the entry that matched", func(t *testing.T) {
		r, err := c.events.ExplainRouting(c.ctx(), &controlv1.ExplainRoutingRequest{EventId: "o2"})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"orders": "order.*", "items": "order.item.added", "all": "*", "invoices": ""}
		for _, v := range r.GetEndpoints() {
			c.mu.Lock()
			name := c.names[v.GetEndpointId()]
			c.mu.Unlock()
			w, listed := want[name]
			if !listed {
				continue
			}
			if v.GetMatchedBy() != w {
				t.Errorf("%s: matched_by %q; want %q", name, v.GetMatchedBy(), w)
			}
			if name == "orders" && !strings.Contains(v.GetReason(), "subscribed to order.item.added through order.*") {
				t.Errorf("orders: reason %q; want it to name order.* as the entry that matched", v.GetReason())
			}
			if name == "invoices" && v.GetVerdict() != controlv1.RoutingVerdict_VERDICT_NOT_SUBSCRIBED {
				t.Errorf("invoices: %v; want NOT_SUBSCRIBED", v.GetVerdict())
			}
		}
		r2 := n.restGet(t, c.key, "/v1/events/o2/routing")
		found := false
		for _, e := range r2["endpoints"].([]any) {
			m := e.(map[string]any)
			found = found || (m["endpoint_id"] == id("orders") && m["matched_by"] == "order.*")
		}
		if !found {
			t.Errorf("REST routing: no matched_by order.* for orders in %v", r2)
		}
	})

	t.Run("a changed pattern plans by the new one", func(t *testing.T) {
		if _, err := c.endpoints.UpdateEndpoint(c.ctx(), &controlv1.UpdateEndpointRequest{
			EndpointId: id("orders"), Settings: &controlv1.EndpointSettings{EventTypes: []string{"order.paid.*"}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"event_types"}},
		}); err != nil {
			t.Fatal(err)
		}
		if got := plannedTo("o5", "order.paid"); !slices.Equal(got, []string{"all"}) {
			t.Errorf("order.paid after the change planned to %v; want [all]", got)
		}
		if got := plannedTo("o6", "order.paid.late"); !slices.Equal(got, []string{"all", "orders"}) {
			t.Errorf("order.paid.late after the change planned to %v; want [all orders]", got)
		}
	})

	t.Run("reconcile follows the same rule", func(t *testing.T) {
		rep := n.reconcile(t, &controlv1.ReconcileRequest{})
		if !rep.GetClean() {
			t.Fatalf("reconcile not clean: %v", kinds(rep))
		}
	})
}
