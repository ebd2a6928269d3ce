package e2e_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestPassivation: idle grains leave memory after the quiet period and
// come back, rebuilt from their streams, on the next wake or command; a
// paused endpoint with deliveries due is not woken (the sweeper's wakes are
// held back) until it resumes. Before, every grain ever activated stayed,
// and the sweeper woke paused endpoints every few seconds.
func TestPassivation(t *testing.T) {
	n := startE2E(t, node.Config{IdleAfter: 300 * time.Millisecond, SweepInterval: e2eSweep, StaleAfter: e2eStale})
	rc := newHookReceiver(t, time.Now)
	acme := n.tenant(t, "acme", nil)
	acme.endpoint(t, rc, "ep_1", []string{"order.paid"}, nil, answer(http.StatusNoContent))
	active := func() float64 { return n.metric(t, "hookline_grains_active") }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 20 s: %s", what)
			}
			time.Sleep(20 * time.Millisecond) // poll interval
		}
	}

	id := acme.publish(t, "ord_1", "order.paid")[0]
	acme.waitDelivery(t, id, "delivered", hasStatus("succeeded"))
	waitFor("every grain passivated", func() bool { return active() == 0 })

	// A wake brings the endpoint back, rebuilt from its stream.
	id = acme.publish(t, "ord_2", "order.paid")[0]
	acme.waitDelivery(t, id, "delivered by a new activation", hasStatus("succeeded"))

	// Paused, it is not woken for its due delivery.
	if _, err := acme.endpoints.PauseEndpoint(acme.ctx(), &controlv1.PauseEndpointRequest{EndpointId: acme.ids["ep_1"]}); err != nil {
		t.Fatal(err)
	}
	waitFor("every grain passivated again", func() bool { return active() == 0 })
	held := n.metric(t, "hookline_wakes_held_back_total")
	id = acme.publish(t, "ord_3", "order.paid")[0]
	waitFor("the sweeper's wakes of the paused endpoint held back", func() bool {
		return n.metric(t, "hookline_wakes_held_back_total") >= held+3
	})
	if a := active(); a != 0 {
		t.Fatalf("%v grains active while the only endpoint is paused and idle", a)
	}
	if _, err := acme.endpoints.ResumeEndpoint(acme.ctx(), &controlv1.ResumeEndpointRequest{EndpointId: acme.ids["ep_1"]}); err != nil {
		t.Fatal(err)
	}
	acme.waitDelivery(t, id, "delivered after the resume", hasStatus("succeeded"))
}
