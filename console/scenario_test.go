package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

const admin = "console-test-admin"

// testNode is one real Hookline node on loopback, in this process.
type testNode struct {
	srv  *node.Server
	cc   *grpc.ClientConn
	base string // http://127.0.0.1:port
}

func startNode(t *testing.T, portalOrigins ...string) *testNode {
	t.Helper()
	level := slog.LevelWarn
	if os.Getenv("HOOKLINE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := node.New(ctx, node.Config{
		DataDir: filepath.Join(t.TempDir(), "node"), GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Cluster:    cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort, Logger: logger},
		AdminToken: admin, MasterKey: "aGVsbG8taG9va2xpbmUtdGVzdC1tYXN0ZXIta2V5ISE=",
		// Loopback receivers need private targets; metadata addresses stay
		// refused even so, which is the refusal the tenant sees.
		Policy:        &attempt.Policy{AllowPrivate: true},
		PortalOrigins: portalOrigins,
		Logger:        logger,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server stopped with %v", err)
			}
		case <-time.After(45 * time.Second):
			t.Errorf("server did not stop within 45 s")
		}
	})
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &testNode{srv: srv, cc: cc, base: "http://" + srv.HTTPAddr()}
}

// as authenticates a call with token, for the length of the test.
func as(t *testing.T, token string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
}

// tenant creates a tenant and returns one API key of it.
func (n *testNode) tenant(t *testing.T, id string) string {
	t.Helper()
	tenants := controlv1.NewTenantServiceClient(n.cc)
	if _, err := tenants.CreateTenant(as(t, admin), &controlv1.CreateTenantRequest{TenantId: id, Name: strings.ToUpper(id[:1]) + id[1:] + " Inc"}); err != nil {
		t.Fatal(err)
	}
	k, err := tenants.IssueApiKey(as(t, admin), &controlv1.IssueApiKeyRequest{TenantId: id, Name: "backend"})
	if err != nil {
		t.Fatal(err)
	}
	return k.GetApiKey()
}

// portalLink issues a portal token with the API key, as a producer's
// backend does, and returns the link and the token.
func (n *testNode) portalLink(t *testing.T, key string, caps ...string) (link, token string) {
	t.Helper()
	r, err := controlv1.NewPortalServiceClient(n.cc).IssuePortalToken(as(t, key), &controlv1.IssuePortalTokenRequest{Capabilities: caps, Label: "browser test"})
	if err != nil {
		t.Fatal(err)
	}
	return n.base + r.GetPortalPath(), r.GetPortalToken()
}

// receiver answers 422 to the events in failing, 200 to the others.
type receiver struct {
	srv     *httptest.Server
	failing atomic.Pointer[string]
	got     atomic.Int64
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.got.Add(1)
		if f := rc.failing.Load(); f != nil && *f == r.Header.Get("webhook-event-id") {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":"unknown customer"}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// TestConsole drives the console and the portal in headless Chromium
// against a real node: the scenarios of issue 15, as phases that build on
// each other.
func TestConsole(t *testing.T) {
	chromium(t) // skip before starting a node when there is no browser
	n := startNode(t, "https://app.example.com")
	b := newBrowser(t)
	rc := newReceiver(t)
	fail := "evt_fail"
	rc.failing.Store(&fail)
	key := n.tenant(t, "acme")
	link, _ := n.portalLink(t, key, "manage_endpoints", "replay")
	var failedID string
	example, _ := structpb.NewValue(map[string]any{"order": "ord_1", "total": 1250})
	schema, _ := structpb.NewValue(map[string]any{"type": "object", "required": []any{"order"}, "properties": map[string]any{"total": map[string]any{"type": "number", "minimum": 0}}})
	if _, err := controlv1.NewEventTypeServiceClient(n.cc).PutEventType(as(t, key), &controlv1.PutEventTypeRequest{
		EventType: "order.created", Description: "An order was placed.", Example: example, Schema: schema}); err != nil {
		t.Fatalf("define the catalog: %v", err)
	}

	t.Run("tenant creates an endpoint and sees the SSRF refusal at the URL field", func(t *testing.T) {
		b.run(t, "open the portal",
			chromedp.Navigate(link),
			chromedp.WaitVisible(`#new-endpoint`),
			waitFor(`!location.hash.includes("token=")`))
		b.screenshot(t, "portal-endpoints-empty")
		b.run(t, "the catalog beside the form",
			chromedp.Click(`#new-endpoint`),
			chromedp.WaitVisible(`#catalog li[data-type="order.created"]`),
			chromedp.Click(`#catalog li[data-type="order.created"] button`),
			waitFor(`document.getElementById("f-event_types").value === "order.created"`))
		if got := b.text(t, `document.querySelector('#catalog li[data-type="order.created"]').textContent`); !strings.Contains(got, "An order was placed.") || !strings.Contains(got, "version 1") {
			t.Errorf("catalog entry = %q, want its description and version", got)
		}
		b.run(t, "open its schema", chromedp.Click(`#catalog li[data-type="order.created"] details:last-of-type summary`))
		b.screenshot(t, "portal-catalog")
		b.run(t, "refused URL",
			chromedp.WaitVisible(`#f-url`),
			chromedp.SendKeys(`#f-url`, "http://169.254.169.254/latest/meta-data/"),
			chromedp.SetValue(`#f-event_types`, "order.created, order.shipped"),
			chromedp.Click(`form button[type=submit]`),
			chromedp.WaitVisible(`#f-url-err`))
		msg := b.text(t, `document.getElementById("f-url-err").textContent`)
		if !strings.Contains(msg, "169.254.169.254") || !strings.Contains(msg, "metadata") {
			t.Errorf("URL field error = %q, want the metadata refusal", msg)
		}
		if got := b.text(t, `document.getElementById("f-url").getAttribute("aria-invalid") + "," + (document.activeElement && document.activeElement.id)`); got != "true,f-url" {
			t.Errorf("URL field invalid,focused = %q, want true,f-url", got)
		}
		b.screenshot(t, "portal-ssrf-refusal")
		b.run(t, "refused filter",
			chromedp.SetValue(`#f-url`, rc.srv.URL+"/hooks"),
			chromedp.SetValue(`#f-filter`, "data.total >"),
			chromedp.Click(`form button[type=submit]`),
			chromedp.WaitVisible(`#f-filter-err`))
		if msg := b.text(t, `document.getElementById("f-filter-err").textContent`); !strings.Contains(msg, "column") {
			t.Errorf("filter field error = %q, want the position of the mistake", msg)
		}
		b.run(t, "create the endpoint",
			chromedp.SetValue(`#f-filter`, "data.total > 0"),
			chromedp.SetValue(`#f-description`, "orders to the warehouse"),
			chromedp.Click(`form button[type=submit]`),
			chromedp.WaitVisible(`#secret`))
		if s := b.text(t, `document.getElementById("secret").textContent`); !strings.HasPrefix(s, "whsec_") {
			t.Errorf("secret shown = %q, want whsec_…", s)
		}
		b.run(t, "open it", chromedp.Click(`#open-endpoint`), chromedp.WaitVisible(`#health-summary`))
	})

	t.Run("deliveries arrive and a failed one is replayed", func(t *testing.T) {
		events := controlv1.NewEventServiceClient(n.cc)
		for i, id := range []string{"evt_1001", fail, "evt_1003"} {
			if _, err := events.Publish(as(t, key), &controlv1.PublishRequest{EventId: id, Type: "order.created",
				Payload: []byte(fmt.Sprintf(`{"order":"ord_%d","total":%d}`, i+1, (i+1)*1250))}); err != nil {
				t.Fatal(err)
			}
		}
		b.run(t, "see them arrive",
			goTo("#/deliveries"), // the token stays in the page's memory
			waitFor(`document.querySelectorAll("#deliveries tbody tr").length === 3`),
			waitFor(`[...document.querySelectorAll("#deliveries tbody tr")].every(r => !r.textContent.includes("pending"))`))
		row := b.text(t, `document.querySelector('#deliveries tr[data-event="evt_fail"]').textContent`)
		if !strings.Contains(row, "failed") || !strings.Contains(row, "422") {
			t.Fatalf("row of evt_fail = %q, want failed with 422", row)
		}
		failedID = b.text(t, `document.querySelector('#deliveries tr[data-event="evt_fail"]').dataset.delivery`)
		b.screenshot(t, "portal-deliveries")
		b.run(t, "open the failed delivery",
			chromedp.Click(`#deliveries tr[data-event="evt_fail"] a`),
			chromedp.WaitVisible(`#attempts tr[data-attempt="1"]`))
		if a := b.text(t, `document.querySelector('#attempts tr[data-attempt="1"]').textContent`); !strings.Contains(a, "422") || !strings.Contains(a, "unknown customer") {
			t.Errorf("attempt 1 = %q, want 422 and the response's prefix", a)
		}
		rc.failing.Store(nil) // the receiver is fixed
		b.run(t, "replay it",
			chromedp.Click(`#replay`),
			chromedp.WaitVisible(`#attempts tr[data-attempt="2"]`))
		a2 := b.text(t, `document.querySelector('#attempts tr[data-attempt="2"]').textContent`)
		if !strings.Contains(a2, "manual") || !strings.Contains(a2, "200") {
			t.Errorf("attempt 2 = %q, want a manual attempt answered 200", a2)
		}
		b.screenshot(t, "portal-delivery-replayed")
	})

	t.Run("endpoint health and settings", func(t *testing.T) {
		b.run(t, "open the endpoint",
			goTo("#/endpoints"),
			chromedp.WaitVisible(`table a`),
			chromedp.Click(`table a`),
			waitFor(`(document.getElementById("health-summary")||{}).textContent?.includes("succeeded 3")`))
		b.screenshot(t, "portal-endpoint")
		b.run(t, "pause and resume",
			chromedp.Click(`//button[text()="Pause"]`),
			waitFor(`document.querySelector("dl.facts .badge")?.textContent === "paused"`),
			chromedp.Click(`//button[text()="Resume"]`),
			waitFor(`document.querySelector("dl.facts .badge")?.textContent === "active"`))
		b.run(t, "edit the description",
			chromedp.SetValue(`#f-description`, "orders and returns"),
			chromedp.Click(`//button[text()="Save changes"]`),
			waitFor(`document.getElementById("f-description")?.value === "orders and returns" && [...document.querySelectorAll("dl.facts dd")].some(d => d.textContent === "2")`))
		b.run(t, "rotate the secret",
			chromedp.SetValue(`#rotate-overlap`, "3600"),
			chromedp.Click(`#rotate-h + p + form button`),
			chromedp.WaitVisible(`#secret`))
		if got := b.text(t, `document.getElementById("secret").closest(".notice").textContent`); !strings.Contains(got, "whsec_") || !strings.Contains(got, "previous secret (v1) keeps signing until") {
			t.Errorf("rotation notice = %q", got)
		}
		b.run(t, "recover the last day",
			chromedp.Click(`#recover-h + p + form button`),
			waitFor(`document.querySelector("#recover-h").parentElement.textContent.includes("done")`))
		b.run(t, "a header name that is not one",
			chromedp.SetValue(`#f-headers`, "X Bad: 1"),
			chromedp.Click(`//button[text()="Save changes"]`),
			chromedp.WaitVisible(`#f-headers-err`))
		if msg := b.text(t, `document.getElementById("f-headers-err").textContent`); !strings.Contains(msg, "not an HTTP header name") {
			t.Errorf("headers field error = %q", msg)
		}
		b.run(t, "an OAuth2 grant without its secret",
			chromedp.SetValue(`#f-headers`, "X-Region: eu"),
			chromedp.SetValue(`#f-oauth2_token_url`, "https://auth.example.com/token"),
			chromedp.SetValue(`#f-oauth2_client_id`, "hookline"),
			chromedp.Click(`//button[text()="Save changes"]`),
			chromedp.WaitVisible(`#f-oauth2_client_secret-err`))
		b.run(t, "a header and a secret header",
			chromedp.Evaluate[chromedp.Void](`document.getElementById("f-oauth2_token_url").value = document.getElementById("f-oauth2_client_id").value = ""`),
			chromedp.SetValue(`#f-secret_headers`, "X-Api-Key: k-console-1"),
			chromedp.Click(`//button[text()="Save changes"]`),
			waitFor(`(document.getElementById("f-secret_headers")?.placeholder || "").includes("X-Api-Key")`))
		b.screenshot(t, "portal-endpoint-headers")
		if v := b.text(t, `document.getElementById("f-headers").value + "|" + document.getElementById("f-secret_headers").value`); v != "X-Region: eu|" {
			t.Errorf("after saving, headers|secret headers = %q, want the header and no secret value", v)
		}
		id := b.text(t, `decodeURIComponent(location.hash.split("/endpoints/")[1].split(/[?&]/)[0])`)
		ep, err := controlv1.NewEndpointServiceClient(n.cc).GetEndpoint(as(t, key), &controlv1.GetEndpointRequest{EndpointId: id})
		if err != nil || ep.GetSettings().GetHeaders()["X-Region"] != "eu" || strings.Join(ep.GetSettings().GetSecretHeaderNames(), ",") != "X-Api-Key" || len(ep.GetSettings().GetSecretHeaders()) != 0 {
			t.Errorf("endpoint %s read back: %v, %v", id, ep.GetSettings(), err)
		}
	})

	t.Run("a read-only portal token cannot change anything", func(t *testing.T) {
		ro := newBrowser(t)
		roLink, roToken := n.portalLink(t, key)
		ro.run(t, "open the read-only portal", chromedp.Navigate(roLink), chromedp.WaitVisible(`table a`))
		if got := ro.text(t, `String(document.querySelectorAll("#new-endpoint").length)`); got != "0" {
			t.Errorf("read-only portal offers New endpoint (%s)", got)
		}
		ro.run(t, "the skip link, from the keyboard", chromedp.Focus(`.skip`), chromedp.KeyEvent("\r"))
		if got := ro.text(t, `document.activeElement.id + " " + location.hash`); got != "main #/endpoints" {
			t.Errorf("after the skip link: focus and route = %q, want main #/endpoints", got)
		}
		ro.run(t, "open the endpoint", chromedp.Click(`table a`), chromedp.WaitVisible(`#f-url`))
		if got := ro.text(t, `[document.querySelectorAll("button").length, document.getElementById("f-url").readOnly, document.querySelectorAll("#rotate-h,#recover-h").length].join(",")`); got != "0,true,0" {
			t.Errorf("read-only endpoint page: buttons,readonly,sections = %s, want 0,true,0", got)
		}
		ro.run(t, "open the delivery", goTo("#/deliveries/"+failedID), chromedp.WaitVisible(`#attempts`))
		if got := ro.text(t, `String(document.querySelectorAll("#replay").length)`); got != "0" {
			t.Errorf("read-only delivery page offers Replay")
		}
		// The page offers nothing; the API refuses anyway, from the page
		// itself, whatever a user types in the console.
		codes := ro.text(t, fmt.Sprintf(`(async () => {
			const h = {Authorization: "Bearer " + %s, "Content-Type": "application/json"};
			const calls = [
				["POST", "/v1/webhook-endpoints/%s/pause", "{}"],
				["POST", "/v1/webhook-deliveries/%s/replay", "{}"],
				["POST", "/v1/webhook-endpoints", JSON.stringify({url: "https://example.com/x", event_types: ["a.b"]})],
				["POST", "/v1/events", JSON.stringify({event_id: "x1", type: "a.b", data: {}})],
				["POST", "/v1/portal-tokens", JSON.stringify({capabilities: ["replay"]})],
				["GET", "/v1/tenants/acme", null],
			];
			const out = [];
			for (const [m, p, body] of calls) out.push((await fetch(p, {method: m, headers: h, body})).status);
			return out.join(",");
		})()`, js(roToken), endpointOf(t, n, key), failedID))
		if codes != "403,403,403,403,403,403" {
			t.Errorf("writes with a read-only portal token answered %s, want 403 each", codes)
		}
		ep, err := controlv1.NewEndpointServiceClient(n.cc).ListEndpoints(as(t, key), &controlv1.ListEndpointsRequest{})
		if err != nil || len(ep.GetEndpoints()) != 1 || ep.GetEndpoints()[0].GetStatus() != controlv1.Endpoint_STATUS_ACTIVE {
			t.Errorf("after the refused writes: %v, %v; want the one endpoint, still active", ep, err)
		}
	})

	t.Run("operator follows the delivery through the audit browser", func(t *testing.T) {
		op := newBrowser(t)
		op.run(t, "sign in",
			chromedp.Navigate(n.base+"/console/"),
			chromedp.WaitVisible(`#signin-token`),
			chromedp.SendKeys(`#signin-token`, admin),
			chromedp.Click(`form button[type=submit]`),
			chromedp.WaitVisible(`#tenants`))
		op.screenshot(t, "operator-tenants")
		op.run(t, "change a quota",
			chromedp.Click(`button[aria-label="Change the quota of acme"]`),
			chromedp.WaitVisible(`#qw`),
			chromedp.SetValue(`#qw`, "3"),
			chromedp.Click(`#quota-form button[type=submit]`),
			waitFor(`[...document.querySelectorAll("#tenants tbody tr")].some(r => r.cells[0].textContent === "acme" && r.cells[4].textContent === "3")`))
		op.run(t, "issue a portal link for acme",
			goTo("#/t/acme/portal-links"),
			chromedp.WaitVisible(`input[value=replay]`),
			chromedp.Click(`input[value=replay]`),
			chromedp.SendKeys(`#pl-label`, "from the console"),
			chromedp.Click(`form button[type=submit]`),
			chromedp.WaitVisible(`#portal-link`),
			waitFor(`[...document.querySelectorAll("table tbody tr")].some(r => r.textContent.includes("from the console") && r.textContent.includes("read, replay"))`))
		if l := op.text(t, `document.getElementById("portal-link").textContent`); !strings.HasPrefix(l, n.base+"/console/portal#token=hlp_") {
			t.Errorf("portal link = %q", l)
		}
		rows := op.text(t, `String(document.querySelectorAll("table tbody tr").length)`)
		op.run(t, "revoke it",
			chromedp.Click(`table tbody tr button.danger`),
			waitFor(`String(document.querySelectorAll("table tbody tr").length) !== `+js(rows)))
		op.run(t, "tenant, deliveries, the replayed one",
			goTo("#/tenants"),
			chromedp.WaitVisible(`#tenants a`),
			chromedp.Click(`#tenants a`),
			chromedp.WaitVisible(`table a`),
			goTo("#/t/acme/deliveries"),
			waitFor(`document.querySelector('#deliveries tr[data-event="evt_fail"] a') !== null`),
			chromedp.Click(`#deliveries tr[data-event="evt_fail"] a`),
			chromedp.WaitVisible(`#follow-audit`),
			chromedp.Click(`#follow-audit`),
			chromedp.WaitVisible(`#trace`))
		types := op.text(t, `[...document.querySelectorAll("#trace article")].map(a => a.dataset.type).join(",")`)
		if want := "EventPublished,DeliveriesPlanned,AttemptFailed,ReplayRequested,AttemptSucceeded"; types != want {
			t.Errorf("trace = %s, want %s", types, want)
		}
		replay := op.text(t, `document.querySelector('#trace article[data-type="ReplayRequested"] header').textContent`)
		if !strings.Contains(replay, "portal_token:ptk_") {
			t.Errorf("ReplayRequested header = %q, want issued by the portal token", replay)
		}
		op.screenshot(t, "operator-audit-trace")
		op.run(t, "read the endpoint category",
			goTo("#/audit?category=endpoint"),
			chromedp.WaitVisible(`#audit-events article`))
		if got := op.text(t, `document.querySelector('#audit-events article').dataset.type`); got != "EndpointCreated" {
			t.Errorf("first event of category endpoint = %s, want EndpointCreated", got)
		}
		op.run(t, "cluster", goTo("#/cluster"), chromedp.WaitVisible(`#nodes tbody tr`))
		if got := op.text(t, `document.querySelector("#nodes tbody tr").textContent`); !strings.Contains(got, "256 / 256") || !strings.Contains(got, "this node") {
			t.Errorf("cluster row = %q, want 256 / 256 partitions on this node", got)
		}
		op.screenshot(t, "operator-cluster")
	})

	t.Run("10,000 deliveries paged through the API cursors", func(t *testing.T) {
		bulkKey := n.tenant(t, "bulk")
		eps := controlv1.NewEndpointServiceClient(n.cc)
		created, err := eps.CreateEndpoint(as(t, bulkKey), &controlv1.CreateEndpointRequest{EndpointId: "ep_bulk",
			Settings: &controlv1.EndpointSettings{Url: rc.srv.URL + "/bulk", EventTypes: []string{"bulk.item"}}})
		if err != nil {
			t.Fatal(err)
		}
		bulkID := created.GetEndpoint().GetEndpointId() // the chosen id with its tenant's tag
		// Paused: the 10,000 deliveries stay pending, no receiver involved.
		if _, err := eps.PauseEndpoint(as(t, bulkKey), &controlv1.PauseEndpointRequest{EndpointId: bulkID}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		events := controlv1.NewEventServiceClient(n.cc)
		for batch := range 100 {
			req := &controlv1.PublishBatchRequest{}
			for i := range 100 {
				req.Events = append(req.Events, &controlv1.PublishRequest{EventId: "bulk_" + strconv.Itoa(batch*100+i), Type: "bulk.item", Payload: []byte(`{}`)})
			}
			r, err := events.PublishBatch(as(t, bulkKey), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range r.GetResults() {
				if res.GetErrorCode() != "" {
					t.Fatalf("publish: %s %s", res.GetErrorCode(), res.GetErrorMessage())
				}
			}
		}
		t.Logf("published 10,000 events in %v", time.Since(start).Round(time.Millisecond))
		bb := newBrowser(t)
		bb.run(t, "sign in with the API key",
			chromedp.Navigate(n.base+"/console/"),
			chromedp.WaitVisible(`#signin-token`),
			chromedp.SendKeys(`#signin-token`, bulkKey+"\r"), // Enter submits
			chromedp.WaitVisible(`table a`),
			goTo("#/deliveries?page_size=100"),
			waitFor(`document.querySelectorAll("#deliveries tbody tr").length === 100`))
		rows := func() []string {
			return strings.Split(bb.text(t, `[...document.querySelectorAll("#deliveries tbody tr")].map(r => r.dataset.event).join(",")`), ",")
		}
		first := rows()
		if !strings.HasPrefix(first[0], "bulk_99") {
			t.Errorf("first row = %s, want one of the last batch (newest first)", first[0])
		}
		seen := map[string]bool{}
		for _, r := range first {
			seen[r] = true
		}
		var ms []string
		for page := 2; page <= 6; page++ {
			bb.run(t, "next page, from the keyboard",
				chromedp.Focus(`#next-page`),
				chromedp.KeyEvent("\r"),
				waitFor(fmt.Sprintf(`document.querySelector("#deliveries caption")?.textContent.startsWith("Page %d:") && document.querySelectorAll("#deliveries tbody tr").length === 100`, page)))
			ms = append(ms, bb.text(t, `document.getElementById("deliveries").dataset.loadMs`))
			for _, r := range rows() {
				if seen[r] {
					t.Errorf("page %d repeats %s", page, r)
				}
				seen[r] = true
			}
		}
		if len(seen) != 600 {
			t.Errorf("6 pages showed %d deliveries, want 600 distinct", len(seen))
		}
		bb.run(t, "previous page", chromedp.Click(`#prev-page`),
			waitFor(`document.querySelector("#deliveries caption")?.textContent.startsWith("Page 5:")`))
		t.Logf("pages 2-6 of 10,000 deliveries, 100 rows each: API call + render %s ms", strings.Join(ms, ", "))
		bb.screenshot(t, "tenant-deliveries-10k", true)
	})
}

// endpointOf returns the id of the tenant's only endpoint.
func endpointOf(t *testing.T, n *testNode, key string) string {
	t.Helper()
	r, err := controlv1.NewEndpointServiceClient(n.cc).ListEndpoints(as(t, key), &controlv1.ListEndpointsRequest{})
	if err != nil || len(r.GetEndpoints()) == 0 {
		t.Fatalf("list endpoints: %v", err)
	}
	return r.GetEndpoints()[0].GetEndpointId()
}

// goTo moves the page to another route of the console: a change of the
// fragment, so the page (and the token in its memory) stays.
func goTo(hash string) step {
	return chromedp.Evaluate[chromedp.Void]("location.hash = " + js(hash))
}
