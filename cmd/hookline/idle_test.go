package main_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestIdleAfterFlag: `serve --idle-after` sets the quiet period after which
// idle grains leave memory: with 1 s, the tenant and endpoint grains of a
// delivered event are gone within seconds (the default is 2 min). A
// negative value is refused with a message that names the flag.
func TestIdleAfterFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if out := serveFails(t, nil, "--data", t.TempDir(), "--idle-after", "-1s"); !strings.Contains(out, "--idle-after -1s: must be 0") {
		t.Fatalf("serve --idle-after -1s refused without naming the flag:\n%s", out)
	}

	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { received.Add(1) }))
	defer srv.Close()
	n := startNode(t, t.TempDir(), "--idle-after", "1s")
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	key := must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"}))
	api := n.as(t, key.GetApiKey())
	must(api.endpoints().CreateEndpoint(api.ctx(), &controlv1.CreateEndpointRequest{
		EndpointId: "ep_orders", Settings: &controlv1.EndpointSettings{Url: srv.URL + "/in", EventTypes: []string{"order.paid"}},
	}))
	must(api.events().Publish(api.ctx(), &controlv1.PublishRequest{EventId: "ord_1", Type: "order.paid", Payload: []byte(`{"order":1}`)}))
	waitForLong(t, 20*time.Second, func() (int64, bool) { return received.Load(), received.Load() == 1 })
	waitForLong(t, 30*time.Second, func() (string, bool) {
		v, ok := nodeMetric(t, n, "hookline_grains_active")
		return fmt.Sprintf("%v grains active (exported: %v)", v, ok), ok && v == 0
	})
}
