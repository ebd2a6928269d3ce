package main_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// receiver records every webhook it gets, by webhook-id, and checks each
// signature with the independent Standard Webhooks library.
type receiver struct {
	mu      sync.Mutex // guards the fields below
	wh      *standardwebhooks.Webhook
	seen    map[string]int
	badSigs int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wh == nil || r.wh.Verify(body, req.Header) != nil {
		r.badSigs++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.seen[req.Header.Get("webhook-id")]++
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) counts() (unique, total, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.seen {
		unique++
		total += n
	}
	return unique, total, r.badSigs
}

// TestKillAndRestartLosesNothing kills `hookline serve` with SIGKILL while
// deliveries are in flight, restarts it on the same data directory, and
// checks that every planned delivery reaches the receiver (with a valid
// signature), that none stays pending, and that duplicates only repeat a
// webhook-id.
func TestKillAndRestartLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	rcv := &receiver{seen: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	data := t.TempDir()
	n := startNode(t, data)
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	key := must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"}))
	api := n.as(t, key.GetApiKey())
	created := must(api.endpoints().CreateEndpoint(api.ctx(), &controlv1.CreateEndpointRequest{
		EndpointId: "ep_orders",
		Settings:   &controlv1.EndpointSettings{Url: srv.URL + "/in", EventTypes: []string{"order.paid"}, RatePerSecond: 1000, Burst: 100},
	}))
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.wh = wh
	rcv.mu.Unlock()

	const events = 400
	planned := map[string]bool{}
	batch := &controlv1.PublishBatchRequest{}
	for i := range events {
		batch.Events = append(batch.Events, &controlv1.PublishRequest{EventId: fmt.Sprintf("ord_%04d", i), Type: "order.paid", Payload: []byte(fmt.Sprintf(`{"order":%d}`, i))})
		if len(batch.Events) == 100 {
			res := must(api.events().PublishBatch(api.ctx(), batch))
			for _, r := range res.GetResults() {
				if r.GetErrorCode() != "" {
					t.Fatalf("publish: %s", r.GetErrorMessage())
				}
				for _, d := range r.GetResponse().GetDeliveries() {
					planned[d.GetDeliveryId()] = true
				}
			}
			batch = &controlv1.PublishBatchRequest{}
		}
	}
	if len(planned) != events {
		t.Fatalf("planned %d deliveries, want %d", len(planned), events)
	}
	// Kill the node while deliveries are going on.
	waitFor(t, func() (int, bool) { u, _, _ := rcv.counts(); return u, u >= 20 })
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.done
	before, _, _ := rcv.counts()
	t.Logf("killed with %d of %d deliveries received", before, events)

	n = startNode(t, data)
	api = n.as(t, key.GetApiKey())
	waitForLong(t, 90*time.Second, func() (int, bool) { u, _, _ := rcv.counts(); return u, u == events })
	unique, total, bad := rcv.counts()
	rcv.mu.Lock()
	for id := range rcv.seen {
		if !planned[id] {
			t.Errorf("received unplanned webhook-id %s", id)
		}
	}
	rcv.mu.Unlock()
	if bad != 0 {
		t.Errorf("%d requests failed signature verification", bad)
	}
	t.Logf("after restart: %d unique deliveries, %d requests, %d duplicates (each repeats a webhook-id)", unique, total, total-unique)
	// History agrees: nothing pending or failed.
	for _, st := range []string{"pending", "failed"} {
		got := waitFor(t, func() (int, bool) {
			l, err := api.deliveriesClient().ListDeliveries(api.ctx(), &controlv1.ListDeliveriesRequest{Status: st, PageSize: 10})
			return len(l.GetDeliveries()), err == nil && len(l.GetDeliveries()) == 0
		})
		if got != 0 {
			t.Errorf("%d deliveries %s", got, st)
		}
	}
}

func waitForLong[T any](t *testing.T, d time.Duration, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v, ok := f()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v (last: %v)", d, v)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval
	}
}
