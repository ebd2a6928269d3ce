package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/reconcile"
)

var quiet = slog.New(slog.DiscardHandler)

// testLog is an embedded log in memory, and helpers that write Hookline's
// events to it directly, as their writers would.
type testLog struct {
	t   *testing.T
	l   *embedded.Log
	now time.Time
}

func newTestLog(t *testing.T) *testLog {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &testLog{t: t, l: l, now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

// append appends msgs to stream at the end, each in partition part.
func (tl *testLog) append(stream string, part events.Partition, msgs ...proto.Message) events.Position {
	tl.t.Helper()
	ctx := context.Background()
	var expected events.ExpectedRevision = events.NoStream{}
	if recs, err := tl.l.ReadStream(ctx, stream, events.Backwards, events.End, 1); err == nil && len(recs) == 1 {
		expected = events.Exact(recs[0].Revision)
	} else if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		tl.t.Fatal(err)
	}
	var evs []events.Event
	for i, m := range msgs {
		ev, err := events.EncodeIn(m, fmt.Sprintf("test/%s/%d/%d", stream, time.Now().UnixNano(), i), stream, part)
		if err != nil {
			tl.t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := tl.l.Append(ctx, stream, expected, evs...)
	if err != nil {
		tl.t.Fatal(err)
	}
	return res.Position
}

func (tl *testLog) endpoint(tenant, id string, types ...string) {
	tl.append(events.EndpointStream(id), events.NoPartition, &hooklinev1.EndpointCreated{
		TenantId: tenant, EndpointId: id, ConfigVersion: 1, Config: &hooklinev1.EndpointConfig{Url: "https://example.com/" + id, EventTypes: types},
		At: timestamppb.New(tl.now),
	})
}

// publish appends an event and its plan, one chunk per list of endpoints
// (chunks counts the chunks the publish says it wrote).
func (tl *testLog) publish(tenant, event, typ string, chunks int32, plan ...[]string) events.Position {
	tl.t.Helper()
	stream := events.EventStream(tenant, event)
	ctx := context.Background()
	pub, err := events.Encode(&hooklinev1.EventPublished{TenantId: tenant, EventId: event, EventType: typ, Payload: []byte(`{}`), At: timestamppb.New(tl.now)}, "publish", stream)
	if err != nil {
		tl.t.Fatal(err)
	}
	evs := []events.Event{pub}
	for i, eps := range plan {
		dp := &hooklinev1.DeliveriesPlanned{TenantId: tenant, EventId: event, EventType: typ, Chunk: int32(i), Chunks: chunks,
			At: timestamppb.New(tl.now), ExpiresAt: timestamppb.New(tl.now.Add(24 * time.Hour))}
		part := events.NoPartition
		for _, ep := range eps {
			dp.Deliveries = append(dp.Deliveries, &hooklinev1.PlannedDelivery{DeliveryId: events.DeliveryID(tenant, event, ep), EndpointId: ep, ConfigVersion: 1})
			part = events.PartitionOf(ep)
		}
		ev, err := events.EncodeIn(dp, fmt.Sprintf("plan/%d", i), stream, part)
		if err != nil {
			tl.t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := tl.l.Append(ctx, stream, events.NoStream{}, evs...)
	if err != nil {
		tl.t.Fatal(err)
	}
	return res.Position
}

func (tl *testLog) head() events.Position {
	tl.t.Helper()
	h, err := tl.l.Head(context.Background())
	if err != nil {
		tl.t.Fatal(err)
	}
	return h
}

// found is a discrepancy as the tests compare it.
type found struct {
	Kind, Event string
	Deliveries  []string
	Repairable  bool
	Repaired    bool
}

func foundOf(ds []*controlv1.Discrepancy) []found {
	var out []found
	for _, d := range ds {
		ids := slices.Clone(d.GetDeliveryIds())
		slices.Sort(ids)
		out = append(out, found{Kind: d.GetKind(), Event: d.GetEventId(), Deliveries: ids, Repairable: d.GetRepairable(), Repaired: d.GetRepaired()})
	}
	slices.SortFunc(out, func(a, b found) int {
		if a.Event != b.Event {
			if a.Event < b.Event {
				return -1
			}
			return 1
		}
		if a.Kind < b.Kind {
			return -1
		}
		if a.Kind > b.Kind {
			return 1
		}
		return 0
	})
	return out
}

func ids(tenant, event string, eps ...string) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, events.DeliveryID(tenant, event, ep))
	}
	slices.Sort(out)
	return out
}

// TestPlans: each way a plan can differ from its publish and from the
// subscriptions of its time is found with its ids; a repair plans what is
// missing from those subscriptions (not from later ones), records why, and
// a second run finds only what cannot be repaired.
func TestPlans(t *testing.T) {
	tl := newTestLog(t)
	const tn = "t1"
	tl.endpoint(tn, "ep_a1", "a")
	tl.endpoint(tn, "ep_a2", "a")
	tl.endpoint(tn, "ep_b", "b")
	tl.endpoint(tn, "ep_all")
	tl.endpoint(tn, "ep_off", "a")
	tl.append(events.EndpointStream("ep_off"), events.NoPartition, &hooklinev1.EndpointDisabled{TenantId: tn, EndpointId: "ep_off"})
	tl.endpoint("t2", "ep_other", "a") // another tenant's

	full := []string{"ep_a1", "ep_a2", "ep_all"}
	tl.publish(tn, "e1", "a", 3, []string{"ep_a1"}, []string{"ep_a2"}, []string{"ep_all"}) // complete
	tl.publish(tn, "e2", "a", 1, []string{"ep_a1"})                                        // short
	tl.publish(tn, "e3", "a", 0)                                                           // no plan
	tl.publish(tn, "e4", "a", 2, []string{"ep_a1"})                                        // chunk 1 of 2 missing
	// e5's endpoint ep_a2 already has an attempt: it is not planned again.
	tl.publish(tn, "e5", "a", 1, []string{"ep_a1", "ep_all"})
	tl.append(events.DeliveryStream(events.DeliveryID(tn, "e5", "ep_a2")), events.PartitionOf("ep_a2"), &hooklinev1.AttemptFailed{
		Attempt: &hooklinev1.Attempt{TenantId: tn, EndpointId: "ep_a2", DeliveryId: events.DeliveryID(tn, "e5", "ep_a2"), EventId: "e5", Number: 1}})
	// Subscribed after all of the above: not owed any of them.
	tl.endpoint(tn, "ep_late", "a")
	tl.publish(tn, "e6", "a", 1, append(slices.Clone(full), "ep_late", "ep_b")) // ep_b was never subscribed to a

	r, err := reconcile.New(reconcile.Config{Log: tl.l, Logger: quiet, Now: func() time.Time { return tl.now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := reconcile.Run{ID: "run1", Head: tl.head()}
	part, err := r.Plans(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	want := []found{
		{Kind: reconcile.KindPlanShort, Event: "e2", Deliveries: ids(tn, "e2", "ep_a2", "ep_all"), Repairable: true},
		{Kind: reconcile.KindPlanMissing, Event: "e3", Deliveries: ids(tn, "e3", full...), Repairable: true},
		{Kind: reconcile.KindPlanIncomplete, Event: "e4", Deliveries: ids(tn, "e4", "ep_a2", "ep_all"), Repairable: true},
		{Kind: reconcile.KindPlanShort, Event: "e5", Deliveries: ids(tn, "e5", "ep_a2"), Repairable: true},
		{Kind: reconcile.KindPlanUnsubscribed, Event: "e6", Deliveries: ids(tn, "e6", "ep_b")},
	}
	if diff := cmp.Diff(want, foundOf(part.GetDiscrepancies())); diff != "" {
		t.Errorf("discrepancies (-want +got):\n%s", diff)
	}
	if got := tenantOf(part, tn).GetEvents(); got != 6 {
		t.Errorf("tenant %s: %d events, want 6", tn, got)
	}

	// Repair: e2, e3 and e4 get their missing deliveries; e5's has a
	// stream already (a second logical delivery otherwise) and stays.
	run2 := reconcile.Run{ID: "run2", Head: tl.head(), Repair: true, IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_ADMIN, Id: "ops"}}
	part, err = r.Plans(ctx, run2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Repaired = want[i].Repairable && want[i].Event != "e5"
	}
	if diff := cmp.Diff(want, foundOf(part.GetDiscrepancies())); diff != "" {
		t.Errorf("repair run (-want +got):\n%s", diff)
	}
	if part.GetRepaired() != 3 {
		t.Errorf("repaired %d, want 3", part.GetRepaired())
	}
	// The repair chunks: the deliveries of the publish's snapshot, at the
	// versions of then, their reason and the run.
	for _, c := range []struct {
		event string
		eps   []string
	}{{"e2", []string{"ep_a2", "ep_all"}}, {"e3", full}, {"e4", []string{"ep_a2", "ep_all"}}} {
		var got []string
		for _, dp := range planned(t, tl, tn, c.event) {
			if dp.GetRepair() == nil {
				continue
			}
			if dp.GetRepair().GetRunId() != "run2" || dp.GetRepair().GetReason() == "" || dp.GetRepair().GetIssuedBy().GetId() != "ops" {
				t.Errorf("%s: repair %v", c.event, dp.GetRepair())
			}
			for _, d := range dp.GetDeliveries() {
				got = append(got, d.GetEndpointId())
			}
		}
		slices.Sort(got)
		if diff := cmp.Diff(c.eps, got); diff != "" {
			t.Errorf("%s re-planned (-want +got):\n%s", c.event, diff)
		}
	}
	audit, err := tl.l.ReadStream(ctx, events.ReconcileStream("run2.plans"), events.Forwards, 0, 10)
	if err != nil || len(audit) != 3 {
		t.Fatalf("repairs recorded: %d, %v; want 3", len(audit), err)
	}
	for i := range audit {
		m, err := events.Decode(&audit[i])
		if err != nil {
			t.Fatal(err)
		}
		if rr := m.(*hooklinev1.ReconcileRepaired); rr.GetKind() != hooklinev1.ReconcileRepaired_KIND_REPLANNED || rr.GetReason() == "" || len(rr.GetDeliveryIds()) == 0 {
			t.Errorf("repair record %v", rr)
		}
	}

	// A second run: what could be repaired was; what cannot stays.
	part, err = r.Plans(ctx, reconcile.Run{ID: "run3", Head: tl.head()})
	if err != nil {
		t.Fatal(err)
	}
	want = []found{
		{Kind: reconcile.KindPlanShort, Event: "e5", Deliveries: ids(tn, "e5", "ep_a2"), Repairable: true},
		{Kind: reconcile.KindPlanUnsubscribed, Event: "e6", Deliveries: ids(tn, "e6", "ep_b")},
	}
	if diff := cmp.Diff(want, foundOf(part.GetDiscrepancies())); diff != "" {
		t.Errorf("second run (-want +got):\n%s", diff)
	}
}

func tenantOf(p *internalv1.ReconcilePartDone, id string) *controlv1.ReconcileTenant {
	for _, t := range p.GetTenants() {
		if t.GetTenantId() == id {
			return t
		}
	}
	return nil
}

func planned(t *testing.T, tl *testLog, tenant, event string) []*hooklinev1.DeliveriesPlanned {
	t.Helper()
	recs, err := tl.l.ReadStream(context.Background(), events.EventStream(tenant, event), events.Forwards, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []*hooklinev1.DeliveriesPlanned
	for i := range recs {
		m, err := events.Decode(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if dp, ok := m.(*hooklinev1.DeliveriesPlanned); ok {
			out = append(out, dp)
		}
	}
	return out
}

// TestPlansFollowPatterns: the subscription snapshot matches an event's
// type as the registry does: a prefix pattern at any depth, not the bare
// prefix; "*" not an operational type, hookline.* every one. A plan that
// follows the rule is clean; one that leaves out a pattern's endpoint is
// short of it, and one that planned "*" for an operational event planned
// an endpoint that was not subscribed.
func TestPlansFollowPatterns(t *testing.T) {
	tl := newTestLog(t)
	const tn = "t1"
	tl.endpoint(tn, "ep_orders", "order.*")
	tl.endpoint(tn, "ep_items", "order.item.*", "invoice.paid")
	tl.endpoint(tn, "ep_all", "*")
	tl.endpoint(tn, "ep_ops", "hookline.*")

	tl.publish(tn, "e1", "order.item.added", 1, []string{"ep_all", "ep_items", "ep_orders"}) // clean
	tl.publish(tn, "e2", "order", 1, []string{"ep_all"})                                     // clean: order.* wants a dot
	tl.publish(tn, "e3", "order.paid", 1, []string{"ep_all"})                                // short of ep_orders
	tl.publish(tn, "e4", "hookline.endpoint.paused", 1, []string{"ep_ops"})                  // clean
	tl.publish(tn, "e5", "hookline.endpoint.paused", 1, []string{"ep_all", "ep_ops"})        // ep_all not subscribed

	r, err := reconcile.New(reconcile.Config{Log: tl.l, Logger: quiet, Now: func() time.Time { return tl.now }})
	if err != nil {
		t.Fatal(err)
	}
	part, err := r.Plans(context.Background(), reconcile.Run{ID: "run1", Head: tl.head()})
	if err != nil {
		t.Fatal(err)
	}
	want := []found{
		{Kind: reconcile.KindPlanShort, Event: "e3", Deliveries: ids(tn, "e3", "ep_orders"), Repairable: true},
		{Kind: reconcile.KindPlanUnsubscribed, Event: "e5", Deliveries: ids(tn, "e5", "ep_all")},
	}
	if diff := cmp.Diff(want, foundOf(part.GetDiscrepancies())); diff != "" {
		t.Errorf("discrepancies (-want +got):\n%s", diff)
	}
}
