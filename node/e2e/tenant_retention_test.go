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
