package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestPublishTraceparent: an event published through the client with the
// producer's traceparent reaches the receiver with a child span of it,
// and GetDelivery's lineage names the same traceparent, its parent and
// why the attempt ran; an invalid traceparent is refused.
func TestPublishTraceparent(t *testing.T) {
	const producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	n := clienttest.Start(t, clienttest.Options{})
	acme := n.Client(t, n.Tenant(t, "acme"))
	ctx := ctxFor(t)
	var mu sync.Mutex
	var seen []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	if _, err := acme.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: rcv.URL, EventTypes: []string{"invoice.paid"}}}); err != nil {
		t.Fatal(err)
	}

	_, err := acme.Publish(ctx, client.Event{ID: "inv_bad", Type: "invoice.paid", Payload: []byte(`{}`), Traceparent: "00-zz"})
	if !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an invalid traceparent: %v; want ErrInvalid", err)
	}
	r, err := acme.Publish(ctx, client.Event{ID: "inv_1", Type: "invoice.paid", Payload: []byte(`{}`), Traceparent: producer})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetTraceId() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("trace id %q; want the producer's", r.GetTraceId())
	}
	var d *controlv1.Delivery
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err = acme.GetDelivery(ctx, &controlv1.GetDeliveryRequest{DeliveryId: r.GetDeliveries()[0].GetDeliveryId()})
		if err == nil && len(d.GetAttempts()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt recorded: %v %v", d, err)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for an event
	}
	a := d.GetAttempts()[0]
	tp := a.GetTrace().GetTraceparent()
	if len(tp) != 55 || tp[:36] != producer[:36] || tp[36:52] == producer[36:52] || a.GetTrace().GetParentSpanId() != "b7ad6b7169203331" ||
		a.GetTrigger().GetKind() != hooklinev1.AttemptTrigger_KIND_SCHEDULED {
		t.Fatalf("lineage %v; want a child span of %s, scheduled", a, producer)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != tp {
		t.Fatalf("the receiver saw %q; the lineage says %q", seen, tp)
	}
}
