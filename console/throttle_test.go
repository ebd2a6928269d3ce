package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestConsoleThrottledTenant: a tenant held back by its quota shows as
// throttled, and by what, in the operator's tenant and cluster views; a
// tenant that waited for nothing does not.
func TestConsoleThrottledTenant(t *testing.T) {
	chromium(t) // skip before starting a node when there is no browser
	n := startNode(t)
	rc := newReceiver(t)
	tenants := controlv1.NewTenantServiceClient(n.cc)
	noisy := n.tenant(t, "noisy")
	n.tenant(t, "calm")
	if _, err := tenants.SetQuota(as(t, admin), &controlv1.SetQuotaRequest{TenantId: "noisy", Quota: &hooklinev1.Quota{AttemptsPerSecond: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := controlv1.NewEndpointServiceClient(n.cc).CreateEndpoint(as(t, noisy), &controlv1.CreateEndpointRequest{
		Settings: &controlv1.EndpointSettings{Url: rc.srv.URL + "/noisy", EventTypes: []string{"load.item"}, RatePerSecond: 1000, Burst: 1000, MaxInFlight: 100}}); err != nil {
		t.Fatal(err)
	}
	events := controlv1.NewEventServiceClient(n.cc)
	batch := &controlv1.PublishBatchRequest{}
	for i := range 20 {
		batch.Events = append(batch.Events, &controlv1.PublishRequest{EventId: fmt.Sprint("load_", i), Type: "load.item", Payload: []byte(`{}`)})
	}
	if _, err := events.PublishBatch(as(t, noisy), batch); err != nil {
		t.Fatal(err)
	}
	// The quota lets two attempts a second through: the others wait for it.
	deadline := time.Now().Add(40 * time.Second)
	for {
		c, err := controlv1.NewOperatorServiceClient(n.cc).GetClusterStatus(as(t, admin), &controlv1.GetClusterStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if th := c.GetNodes()[0].GetThrottled(); len(th) > 0 && th[0].GetTenantId() == "noisy" && th[0].GetQuotaSeconds() >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster status shows no throttled noisy tenant: %v", c.GetNodes()[0].GetThrottled())
		}
		time.Sleep(200 * time.Millisecond) // a poll interval, not a wait for an event
	}

	op := newBrowser(t)
	op.run(t, "sign in",
		chromedp.Navigate(n.base+"/console/"),
		chromedp.WaitVisible(`#signin-token`),
		chromedp.SendKeys(`#signin-token`, admin),
		chromedp.Click(`form button[type=submit]`),
		chromedp.WaitVisible(`#tenants tr[data-tenant="calm"]`))
	row := op.text(t, `document.querySelector('#tenants tr[data-tenant="noisy"]').className + " | " + document.querySelector('#tenants tr[data-tenant="noisy"] td.held').textContent`)
	if !strings.HasPrefix(row, "throttled | quota ") {
		t.Errorf("noisy in the tenants view: %q, want a throttled row held back by its quota", row)
	}
	if got := op.text(t, `document.querySelector('#tenants tr[data-tenant="calm"]').className + document.querySelector('#tenants tr[data-tenant="calm"] td.held').textContent`); got != "" {
		t.Errorf("calm in the tenants view: %q, want nothing held back", got)
	}
	op.screenshot(t, "operator-tenants-throttled")
	op.run(t, "cluster", goTo("#/cluster"), chromedp.WaitVisible(`#throttled tr[data-tenant="noisy"]`))
	cells := op.text(t, `[...document.querySelector('#throttled tr[data-tenant="noisy"]').cells].map(c => c.textContent).join("|")`)
	if parts := strings.Split(cells, "|"); len(parts) != 7 || parts[1] != "noisy" || !strings.HasSuffix(parts[2], " s") {
		t.Errorf("noisy in the cluster view: %q, want seconds of wait for its quota", cells)
	}
	if got := op.text(t, `String(document.querySelectorAll('#throttled tr[data-tenant="calm"]').length)`); got != "0" {
		t.Errorf("calm listed as throttled in the cluster view")
	}
	op.screenshot(t, "operator-cluster-throttled")
}
