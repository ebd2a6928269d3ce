package console_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hookline/hookline/eventtype"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestPortalPatterns: the portal's copy of the matching rule agrees with
// the node's (package eventtype) on every case of a table; beside the new
// endpoint form, each catalog type says whether the event types typed so
// far receive it and through which pattern; a shared prefix offers its
// pattern, which takes the place of the names it covers; the endpoint is
// created with it and listed with it.
func TestPortalPatterns(t *testing.T) {
	chromium(t) // skip before starting a node when there is no browser
	n := startNode(t)
	b := newBrowser(t)
	rc := newReceiver(t)
	key := n.tenant(t, "acme")
	link, _ := n.portalLink(t, key, "manage_endpoints")
	for _, typ := range []string{"order.created", "order.item.added", "invoice.paid"} {
		if _, err := controlv1.NewEventTypeServiceClient(n.cc).PutEventType(as(t, key), &controlv1.PutEventTypeRequest{EventType: typ, Description: "a " + typ}); err != nil {
			t.Fatalf("define %s: %v", typ, err)
		}
	}
	b.run(t, "open the new endpoint form",
		chromedp.Navigate(link),
		chromedp.WaitVisible(`#new-endpoint`),
		chromedp.Click(`#new-endpoint`),
		chromedp.WaitVisible(`#catalog li[data-type="order.created"]`))

	t.Run("the portal matches as the node does", func(t *testing.T) {
		type tcase struct {
			Types []string `json:"types"`
			Typ   string   `json:"typ"`
		}
		cases := []tcase{
			{[]string{"order.*"}, "order.paid"}, {[]string{"order.*"}, "order.item.added"}, {[]string{"order.*"}, "order"},
			{[]string{"order.*"}, "orders.paid"}, {[]string{"*", "order.*", "order.item.*"}, "order.item.added"},
			{[]string{"order.paid", "order.*"}, "order.paid"}, {[]string{"*"}, "hookline.endpoint.paused"},
			{[]string{"hookline.*"}, "hookline.endpoint.paused"}, {nil, "invoice.paid"}, {[]string{"invoice.paid"}, "invoice"},
		}
		in, _ := json.Marshal(cases)
		got := b.text(t, fmt.Sprintf(`import("/console/catalog.js").then(m => JSON.stringify(%s.map(c => m.matchedBy(c.types || [], c.typ))))`, in))
		var portal []string
		if err := json.Unmarshal([]byte(got), &portal); err != nil || len(portal) != len(cases) {
			t.Fatalf("portal answered %s: %v", got, err)
		}
		for i, c := range cases {
			if want, _ := eventtype.Match(c.Types, c.Typ); portal[i] != want {
				t.Errorf("matchedBy(%q, %q): portal %q, node %q", c.Types, c.Typ, portal[i], want)
			}
		}
	})

	t.Run("each catalog type says which entry receives it", func(t *testing.T) {
		covered := func(typ string) string {
			return `document.querySelector('#catalog li[data-type="` + typ + `"]').dataset.covered`
		}
		b.run(t, "type a pattern",
			typeTypes("order.*, invoice.paid"),
			waitFor(covered("order.item.added")+` === "order.*"`))
		for typ, want := range map[string]string{"order.created": "order.*", "order.item.added": "order.*", "invoice.paid": "invoice.paid"} {
			if got := b.text(t, covered(typ)); got != want {
				t.Errorf("%s covered by %q, want %q", typ, got, want)
			}
		}
		if got := b.text(t, `document.querySelector('#catalog li[data-type="order.created"] .covered').textContent`); got != "subscribed through order.*" {
			t.Errorf("order.created says %q", got)
		}
		b.run(t, "a narrower list",
			typeTypes("invoice.paid"),
			waitFor(covered("order.created")+` === ""`))
	})

	t.Run("a shared prefix offers its pattern", func(t *testing.T) {
		b.run(t, "subscribe to order.*",
			typeTypes("order.created, invoice.paid"),
			chromedp.Click(`#catalog-groups button[data-pattern="order.*"]`),
			waitFor(`document.getElementById("f-event_types").value === "invoice.paid, order.*"`))
		if n := b.text(t, `String(document.querySelectorAll('#catalog-groups button').length)`); n != "1" {
			t.Errorf("%s prefix buttons, want 1 (order.*: invoice has one type)", n)
		}
		b.run(t, "create the endpoint",
			chromedp.SetValue(`#f-url`, rc.srv.URL+"/hooks"),
			chromedp.Click(`form button[type=submit]`),
			chromedp.WaitVisible(`#secret`))
		r, err := controlv1.NewEndpointServiceClient(n.cc).ListEndpoints(as(t, key), &controlv1.ListEndpointsRequest{})
		if err != nil || len(r.GetEndpoints()) != 1 {
			t.Fatalf("list endpoints: %v, %v", r, err)
		}
		if got := r.GetEndpoints()[0].GetSettings().GetEventTypes(); strings.Join(got, ",") != "invoice.paid,order.*" {
			t.Errorf("created with event types %q", got)
		}
		b.run(t, "listed with its pattern",
			goTo("#/endpoints"),
			waitFor(`[...document.querySelectorAll("table code")].some(c => c.textContent === "order.*" && c.title.includes("order."))`))
	})
}

// typeTypes replaces the form's event types as typing would: the value,
// then an input event.
func typeTypes(v string) step {
	return chromedp.Evaluate[chromedp.Void](`{const f = document.getElementById("f-event_types"); f.value = ` + js(v) + `; f.dispatchEvent(new Event("input", {bubbles: true}));}`)
}
