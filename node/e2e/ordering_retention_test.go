package e2e_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestOrderingOutlivesTenantRetention: a key's sequence goes on where it
// was after its tenant's own retention dropped the key's deliveries and a
// node rebuilt its projections from what the log still holds (a replaced
// disk): the key's first two deliveries are sent with 1 and 2, the
// retention drops them (once their endpoint's grain has checkpointed the
// key's count), and the key's next delivery is sent with 3. Before, the
// rebuilt node numbered the key from the plans left, and sent 1.
func TestOrderingOutlivesTenantRetention(t *testing.T) {
	clk := &offsetClock{}
	cfg := node.Config{
		DataDir: filepath.Join(t.TempDir(), "node"), Now: clk.Now, Retention: 5 * time.Minute, RetainEvery: 50 * time.Millisecond,
		Schedule: attempt.Schedule{Deadline: 90 * time.Second}, SweepInterval: 50 * time.Millisecond, ProjectionsFS: vfs.NewMem(),
	}
	n, stop := runE2E(t, cfg)
	rc := newHookReceiver(t, clk.Now)
	c := n.tenant(t, "acme", nil)
	if code, got := n.rest(t, http.MethodPatch, c.key, "/v1/tenants/acme", map[string]any{"retention": "2m"}); code != http.StatusOK {
		t.Fatalf("retention 2m: %d %v", code, got)
	}
	c.endpoint(t, rc, "ep_ordered", []string{"order.updated"}, func(s *controlv1.EndpointSettings) { s.Ordering = "key" }, answer(http.StatusOK))
	var first []string
	for _, ev := range []string{"ev_cus_1", "ev_cus_2"} {
		first = append(first, c.publishKeyed(t, ev, "order.updated", "cus_7")...)
		c.waitDelivery(t, first[len(first)-1], "delivered", hasStatus("succeeded"))
	}

	inLog := func(stream string) bool {
		_, err := n.srv.Log().ReadStream(t.Context(), stream, events.Forwards, 0, 1)
		return !errors.Is(err, events.ErrStreamNotFound)
	}
	clk.Add(3 * time.Minute)
	eventually(t, 30*time.Second, "the tenant's retention drops the key's deliveries", func() bool {
		return !inLog(events.DeliveryStream(first[0])) && !inLog(events.DeliveryStream(first[1])) &&
			!inLog(events.EventStream(c.id, "ev_cus_1")) && !inLog(events.EventStream(c.id, "ev_cus_2"))
	})
	if !inLog(events.OrderingStream(c.ids["ep_ordered"])) {
		t.Errorf("the deliveries left the log with no checkpoint of their key's count")
	}

	stop()
	cfg.ProjectionsFS = vfs.NewMem() // a replaced disk: projections built afresh from the log
	n2, _ := runE2E(t, cfg)
	c2 := n2.client(t, c.id, c.key)
	c2.ids = c.ids
	next := c2.publishKeyed(t, "ev_cus_3", "order.updated", "cus_7")
	c2.waitDelivery(t, next[0], "delivered", hasStatus("succeeded"))
	if rs := rc.receipts(next[0]); len(rs) == 0 || rs[0].orderingKey != "cus_7" || rs[0].sequence != 3 {
		t.Errorf("the key's next delivery after the rebuild carried %+v, want ordering key cus_7 and sequence 3", rs)
	}
}
