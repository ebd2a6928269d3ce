package e2e_test

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/faults"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestPlanHandedToActiveGrain: a publish hands its planned deliveries to
// the endpoint grains active on its node, so a first attempt does not wait
// for the projections to apply the plan (in the fairness run, behind
// another tenant's burst of thousands of planned deliveries). The node's
// projections run 4 s behind the log (the fault switch): the endpoint's
// grain, active since the first delivery, attempts the second while the
// projections have not applied its plan yet (its history does not know
// it), and the receiver gets it once, also after the projections catch up.
func TestPlanHandedToActiveGrain(t *testing.T) {
	const lag = 4 * time.Second
	n := startE2E(t, node.Config{Faults: &faults.Set{LagProjections: lag}, ReconcileEvery: -1})
	rc := newHookReceiver(t, nil)
	c := n.tenant(t, "acme", nil)
	c.endpoint(t, rc, "ep_1", []string{"a"}, nil, answer(http.StatusOK))
	c.publish(t, "e1", "a")
	eventually(t, 20*time.Second, "e1 delivered", func() bool { return rc.onPath("/ep_1") == 1 })

	published := time.Now()
	c.publish(t, "e2", "a")
	id := events.DeliveryID("acme", "e2", c.ids["ep_1"])
	// Through the due index it would take the projections' lag at least.
	eventually(t, lag/2, "e2 delivered long before the projections apply its plan", func() bool { return rc.onPath("/ep_1") == 2 })
	_, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: id})
	if status.Code(err) != codes.NotFound {
		if time.Since(published) < lag {
			t.Fatalf("the history knew e2's delivery when it was delivered (err %v): the projections did not lag", err)
		}
		t.Skipf("too slow to tell: the history was read %v after the publish (the projections lag %v)", time.Since(published), lag)
	}
	c.waitDelivery(t, id, "succeeded once the projections caught up", hasStatus("succeeded"))
	if got := rc.onPath("/ep_1"); got != 2 {
		t.Errorf("the receiver got %d requests; want 2 (e1 and e2, once each)", got)
	}
}
