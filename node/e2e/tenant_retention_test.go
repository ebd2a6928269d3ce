package e2e_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestTenantRetention: a tenant whose own retention (2 minutes) is shorter
// than the node's (5 minutes) loses its ended deliveries from the log and
// the history once they are older than it, and they never reach the
// archive; another tenant's are kept until the node's retention, then
// archived. A retention longer than the node's, shorter than the delivery
// deadline (90 s here) or under a minute, is refused.
func TestTenantRetention(t *testing.T) {
	clk := &offsetClock{}
	archiveDir := filepath.Join(t.TempDir(), "archive")
	n, _ := runE2E(t, node.Config{
		DataDir: filepath.Join(t.TempDir(), "node"), Now: clk.Now, Retention: 5 * time.Minute, RetainEvery: 50 * time.Millisecond,
		Schedule: attempt.Schedule{Deadline: 90 * time.Second},
		Archive:  "file://" + archiveDir + "?create_dir=1",
	})
	rc := newHookReceiver(t, clk.Now)
	short, long, late := n.tenant(t, "short", nil), n.tenant(t, "long", nil), n.tenant(t, "late", nil)
	short.endpoint(t, rc, "short_ep", []string{"order.paid"}, nil, answer(http.StatusOK))
	long.endpoint(t, rc, "long_ep", []string{"order.paid"}, nil, answer(http.StatusOK))
	late.endpoint(t, rc, "late_ep", []string{"order.paid"}, nil, answer(http.StatusOK))

	for _, bad := range []string{"10s", "1m", "10m", "a week"} { // under a minute, within the deadline, longer than the node's, not a duration
		if code, got := n.rest(t, http.MethodPatch, short.key, "/v1/tenants/short", map[string]any{"retention": bad}); code != http.StatusBadRequest {
			t.Fatalf("retention %q: %d %v, want 400", bad, code, got)
		}
	}
	code, got := n.rest(t, http.MethodPatch, short.key, "/v1/tenants/short", map[string]any{"retention": "2m"})
	if s, _ := got["settings"].(map[string]any); code != http.StatusOK || s["retention"] != "2m0s" {
		t.Fatalf("retention 2m: %d %v", code, got)
	}

	shortID := short.publish(t, "evt_short", "order.paid")[0]
	longID := long.publish(t, "evt_long", "order.paid")[0]
	lateID := late.publish(t, "evt_late", "order.paid")[0]
	short.waitDelivery(t, shortID, "delivered", hasStatus("succeeded"))
	long.waitDelivery(t, longID, "delivered", hasStatus("succeeded"))
	late.waitDelivery(t, lateID, "delivered", hasStatus("succeeded"))

	inLog := func(stream string) bool {
		_, err := n.srv.Log().ReadStream(t.Context(), stream, events.Forwards, 0, 1)
		return !errors.Is(err, events.ErrStreamNotFound)
	}
	clk.Add(3 * time.Minute)
	eventually(t, 20*time.Second, "the short tenant's streams leave the log", func() bool {
		return !inLog(events.EventStream("short", "evt_short")) && !inLog(events.DeliveryStream(shortID))
	})
	eventually(t, 20*time.Second, "the short tenant's delivery leaves the history", func() bool {
		_, err := short.deliveries.GetDelivery(short.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: shortID})
		return status.Code(err) == codes.NotFound
	})
	if !inLog(events.EventStream("long", "evt_long")) {
		t.Fatal("the other tenant's event left the log before the node's retention")
	}
	long.waitDelivery(t, longID, "still in the history", hasStatus("succeeded"))

	clk.Add(5 * time.Minute)
	eventually(t, 20*time.Second, "the node's retention archives the other tenant's event", func() bool {
		return !inLog(events.EventStream("long", "evt_long"))
	})
	archived := func(stream string) bool {
		t.Helper()
		arc, err := archive.Open(t.Context(), "file://"+archiveDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer arc.Close()
		ok, err := arc.Has(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for stream, want := range map[string]bool{
		events.EventStream("long", "evt_long"): true, events.DeliveryStream(longID): true,
		events.EventStream("short", "evt_short"): false, events.DeliveryStream(shortID): false,
		events.EventStream("late", "evt_late"): true, events.DeliveryStream(lateID): true,
	} {
		if got := archived(stream); got != want {
			t.Errorf("the archive holds %s: %v; want %v", stream, got, want)
		}
	}

	// A tenant that shortens its retention once its streams are archived:
	// the archive is purged of them; the others' stay.
	if code, got := n.rest(t, http.MethodPatch, late.key, "/v1/tenants/late", map[string]any{"retention": "2m"}); code != http.StatusOK {
		t.Fatalf("late retention 2m: %d %v", code, got)
	}
	eventually(t, 20*time.Second, "the archive is purged of the late tenant's streams", func() bool {
		return !archived(events.EventStream("late", "evt_late")) && !archived(events.DeliveryStream(lateID))
	})
	if !archived(events.EventStream("long", "evt_long")) || !archived(events.DeliveryStream(longID)) {
		t.Fatal("the purge took another tenant's streams")
	}
}

// TestTenantRetentionWaitsForThePlan: a tenant's own retention keeps an
// event, and the streams of its deliveries that ended, while another
// delivery of its plan has not ended: one to a paused endpoint, one
// waiting behind its ordering key's parked head; and it keeps the parked
// head's event, which a replay sends again. Past the cutoff, and after a
// restart (no event left in memory), the replay releases the key and the
// delivery that waited is sent with its event's bytes; once every
// delivery of the plan has ended (the paused endpoint's expires when it
// is resumed, past its deadline), the next passes drop the event with all
// its deliveries. Before, a pass dropped each event with the first of its
// deliveries it found ended: after the restart, the replay and the
// delivery that waited found no event to send.
func TestTenantRetentionWaitsForThePlan(t *testing.T) {
	clk := &offsetClock{}
	cfg := node.Config{
		DataDir: filepath.Join(t.TempDir(), "node"), Now: clk.Now, Retention: 30 * time.Minute, RetainEvery: 50 * time.Millisecond,
		Schedule: attempt.Schedule{Deadline: 90 * time.Second}, SweepInterval: 50 * time.Millisecond,
	}
	n, stop := runE2E(t, cfg)
	rc := newHookReceiver(t, clk.Now)
	c := n.tenant(t, "acme", nil)
	if code, got := n.rest(t, http.MethodPatch, c.key, "/v1/tenants/acme", map[string]any{"retention": "2m"}); code != http.StatusOK {
		t.Fatalf("retention 2m: %d %v", code, got)
	}
	c.endpoint(t, rc, "ep_ok", []string{"order.paid", "order.created"}, nil, answer(http.StatusOK))
	c.endpoint(t, rc, "ep_paused", []string{"order.paid"}, nil, answer(http.StatusOK))
	c.endpoint(t, rc, "ep_keyed", []string{"order.paid", "order.created"}, func(s *controlv1.EndpointSettings) {
		s.Ordering, s.KeyFailure, s.MaxAttempts = "key", "park", 1
	}, failOn("ev_head", 1, func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) }))
	if _, err := c.endpoints.PauseEndpoint(c.ctx(), &controlv1.PauseEndpointRequest{EndpointId: c.ids["ep_paused"]}); err != nil {
		t.Fatal(err)
	}
	dlv := func(eventID, endpoint string) string { return events.DeliveryID(c.id, eventID, c.ids[endpoint]) }
	inLog := func(stream string) bool {
		_, err := n.srv.Log().ReadStream(t.Context(), stream, events.Forwards, 0, 1)
		return !errors.Is(err, events.ErrStreamNotFound)
	}

	c.publishKeyed(t, "ev_head", "order.created", "k")
	c.waitDelivery(t, dlv("ev_head", "ep_keyed"), "the key's head failed, parking the key", hasStatus("failed"))
	c.publishKeyed(t, "ev_held", "order.paid", "k")
	c.publish(t, "ev_probe", "order.created")
	for _, id := range []string{dlv("ev_head", "ep_ok"), dlv("ev_held", "ep_ok"), dlv("ev_probe", "ep_ok"), dlv("ev_probe", "ep_keyed")} {
		c.waitDelivery(t, id, "delivered", hasStatus("succeeded"))
	}
	for _, id := range []string{dlv("ev_held", "ep_paused"), dlv("ev_held", "ep_keyed")} {
		c.waitDelivery(t, id, "pending", hasStatus("pending"))
	}

	clk.Add(3 * time.Minute)
	// A pass drops what it found in one batch: once the probe (all of its
	// deliveries ended) is gone, the pass has also judged the others.
	eventually(t, 20*time.Second, "the probe's streams leave the log", func() bool {
		return !inLog(events.EventStream(c.id, "ev_probe")) && !inLog(events.DeliveryStream(dlv("ev_probe", "ep_ok")))
	})
	for stream, why := range map[string]string{
		events.EventStream(c.id, "ev_held"):            "two of its deliveries are pending",
		events.DeliveryStream(dlv("ev_held", "ep_ok")): "its event is kept",
		events.EventStream(c.id, "ev_head"):            "its ordering key's parked head may be replayed",
		events.DeliveryStream(dlv("ev_head", "ep_ok")): "its event is kept",
	} {
		if !inLog(stream) {
			t.Errorf("the tenant's retention dropped %s: %s", stream, why)
		}
	}
	c.waitDelivery(t, dlv("ev_held", "ep_ok"), "still in the history", hasStatus("succeeded"))

	// A restart: what waits reads its event from the log.
	stop()
	n, _ = runE2E(t, cfg)
	ids := c.ids
	c = n.client(t, c.id, c.key)
	c.ids = ids
	// The replay of the parked head releases the key; what waited goes.
	if _, err := c.deliveries.ReplayDelivery(c.ctx(), &controlv1.ReplayDeliveryRequest{DeliveryId: dlv("ev_head", "ep_keyed")}); err != nil {
		t.Fatalf("replay the parked head: %v", err)
	}
	c.waitDelivery(t, dlv("ev_held", "ep_keyed"), "sent once the key moved on", hasStatus("succeeded"))
	rs := rc.receipts(dlv("ev_held", "ep_keyed"))
	if len(rs) != 1 || string(rs[0].body) != `{"event":"ev_held"}` || rs[0].sequence != 2 {
		t.Errorf("the delivery that waited behind its key arrived as %+v, want once, with its event's bytes and sequence 2", rs)
	}
	if _, err := c.endpoints.ResumeEndpoint(c.ctx(), &controlv1.ResumeEndpointRequest{EndpointId: c.ids["ep_paused"]}); err != nil {
		t.Fatal(err)
	}
	// Its deadline passed: it expires. The retention may take it at once.
	eventually(t, 20*time.Second, "the paused endpoint's delivery ends once resumed", func() bool {
		d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: dlv("ev_held", "ep_paused")})
		return status.Code(err) == codes.NotFound || d.GetStatus() == "failed"
	})
	if rs := rc.receipts(dlv("ev_held", "ep_paused")); len(rs) != 0 {
		t.Errorf("the paused endpoint's delivery was sent past its deadline: %+v", rs)
	}

	// Every delivery ended: past the checkpoint of the key's sequences,
	// the events go with all of their deliveries.
	clk.Add(8 * time.Minute)
	eventually(t, 30*time.Second, "the events leave the log with their deliveries", func() bool {
		for _, s := range []string{
			events.EventStream(c.id, "ev_held"), events.EventStream(c.id, "ev_head"),
			events.DeliveryStream(dlv("ev_held", "ep_ok")), events.DeliveryStream(dlv("ev_held", "ep_paused")), events.DeliveryStream(dlv("ev_held", "ep_keyed")),
			events.DeliveryStream(dlv("ev_head", "ep_ok")), events.DeliveryStream(dlv("ev_head", "ep_keyed")),
		} {
			if inLog(s) {
				return false
			}
		}
		return true
	})
	eventually(t, 20*time.Second, "the deliveries leave the history", func() bool {
		_, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: dlv("ev_held", "ep_paused")})
		return status.Code(err) == codes.NotFound
	})
}
