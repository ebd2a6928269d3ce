package e2e_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/faults"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/reconcile"
)

// reconcileRun asks the node for a reconcile (as the admin) and returns
// its report.
func (n *e2eNode) reconcile(t *testing.T, req *controlv1.ReconcileRequest) *controlv1.ReconcileReport {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e2eAdmin)
	rep, err := controlv1.NewReconcileServiceClient(n.cc).Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return rep
}

// kinds lists the kinds of a report's discrepancies, sorted.
func kinds(rep *controlv1.ReconcileReport) []string {
	var out []string
	for _, d := range rep.GetDiscrepancies() {
		out = append(out, d.GetKind())
	}
	slices.Sort(out)
	return out
}

// repairsIn reads the repairs a run recorded in the log.
func repairsIn(t *testing.T, n *e2eNode, runID string) []*hooklinev1.ReconcileRepaired {
	t.Helper()
	stream := events.ReconcileStream(runID + "." + strings.NewReplacer(".", "_", ":", "_").Replace(n.srv.Node().Address()))
	recs, err := n.srv.Log().ReadStream(t.Context(), stream, events.Forwards, 0, 100)
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	var out []*hooklinev1.ReconcileRepaired
	for i := range recs {
		m, err := events.Decode(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.(*hooklinev1.ReconcileRepaired))
	}
	return out
}

// TestReconcileWakesStrandedWork: a node that drops one endpoint's wake
// hints (the fault switch) leaves its due work to nobody. The background
// reconciler counts it (its metric is an alert); reconcile reports it with
// the endpoint's and the delivery's ids; the repair wakes the grain, which
// delivers it once; a second run is clean.
func TestReconcileWakesStrandedWork(t *testing.T) {
	n := startE2E(t, node.Config{
		Faults:         &faults.Set{DropWakes: "stuck"},
		ReconcileEvery: 100 * time.Millisecond, NotPulledAfter: 300 * time.Millisecond,
	})
	rc := newHookReceiver(t, nil)
	c := n.tenant(t, "acme", nil)
	c.endpoint(t, rc, "ep_ok", []string{"a"}, nil, answer(http.StatusOK))
	c.endpoint(t, rc, "ep_stuck", []string{"a"}, nil, answer(http.StatusOK))
	planned := c.publish(t, "e1", "a")
	stuck := events.DeliveryID("acme", "e1", c.ids["ep_stuck"])
	if !slices.Contains(planned, stuck) {
		t.Fatalf("planned %v, want %s among them", planned, stuck)
	}
	eventually(t, 10*time.Second, "ep_ok delivered", func() bool { return rc.onPath("/ep_ok") == 1 })

	eventually(t, 10*time.Second, "the background reconciler counts the stranded work", func() bool {
		return n.metric(t, "hookline_reconcile_discrepancies") >= 1
	})
	rep := n.reconcile(t, &controlv1.ReconcileRequest{NotPulledAfterMs: 300})
	if rep.GetClean() || !slices.Equal(kinds(rep), []string{reconcile.KindNotPulled}) {
		t.Fatalf("report: %v", rep)
	}
	d := rep.GetDiscrepancies()[0]
	if d.GetEndpointId() != c.ids["ep_stuck"] || !slices.Equal(d.GetDeliveryIds(), []string{stuck}) || !d.GetRepairable() || d.GetRepaired() {
		t.Errorf("discrepancy: %v", d)
	}
	if rc.onPath("/ep_stuck") != 0 {
		t.Fatalf("ep_stuck got %d requests before the repair", rc.onPath("/ep_stuck"))
	}

	rep = n.reconcile(t, &controlv1.ReconcileRequest{NotPulledAfterMs: 300, Repair: true})
	if rep.GetRepaired() != 1 || !rep.GetDiscrepancies()[0].GetRepaired() {
		t.Fatalf("repair run: %v", rep)
	}
	eventually(t, 10*time.Second, "ep_stuck delivered after the wake", func() bool { return rc.onPath("/ep_stuck") == 1 })
	c.waitDelivery(t, stuck, "succeeded", hasStatus("succeeded"))
	recorded := repairsIn(t, n, rep.GetRunId())
	if len(recorded) != 1 || recorded[0].GetKind() != hooklinev1.ReconcileRepaired_KIND_WOKEN || recorded[0].GetEndpointId() != c.ids["ep_stuck"] ||
		recorded[0].GetIssuedBy().GetKind() != hooklinev1.Actor_KIND_ADMIN || !strings.Contains(recorded[0].GetReason(), reconcile.KindNotPulled) {
		t.Errorf("repairs recorded: %v", recorded)
	}

	rep = n.reconcile(t, &controlv1.ReconcileRequest{NotPulledAfterMs: 300})
	if !rep.GetClean() {
		t.Errorf("second run: %v", rep)
	}
	if tt := rep.GetTenants(); len(tt) != 1 || tt[0].GetPlanned() != 2 || tt[0].GetSucceeded() != 2 || tt[0].GetEvents() != 1 || tt[0].GetPending() != 0 {
		t.Errorf("tenant counts: %v", tt)
	}
	if rc.onPath("/ep_stuck") != 1 || rc.onPath("/ep_ok") != 1 {
		t.Errorf("requests: ep_ok %d, ep_stuck %d; want one each", rc.onPath("/ep_ok"), rc.onPath("/ep_stuck"))
	}
}

// TestReconcileRebuildsDivergentProjections: the node's projections miss a
// success (the fault switch hides it from them): the due index keeps an
// ended delivery and the history says pending. Reconcile finds both with
// the delivery's id, and a replay of the log disagrees with both
// projections; the repair rebuilds them while the node serves; a second
// run is clean, the history right, and the receiver got one request.
func TestReconcileRebuildsDivergentProjections(t *testing.T) {
	n := startE2E(t, node.Config{Faults: &faults.Set{HideType: "AttemptSucceeded", HideNth: 1}, ReconcileEvery: -1})
	rc := newHookReceiver(t, nil)
	c := n.tenant(t, "acme", nil)
	c.endpoint(t, rc, "ep_1", []string{"a"}, nil, answer(http.StatusOK))
	c.publish(t, "e1", "a")
	id := events.DeliveryID("acme", "e1", c.ids["ep_1"])
	eventually(t, 10*time.Second, "delivered", func() bool { return rc.onPath("/ep_1") == 1 })
	// The attempt is in the delivery's stream (GetDelivery reads it there)
	// once the success is durable; the history, having missed it, still
	// says pending. Before, the run could begin while the success was
	// being appended, and then found the delivery moving: clean.
	if d := c.waitDelivery(t, id, "attempted", func(d *controlv1.Delivery) bool { return len(d.GetAttempts()) > 0 }); d.GetStatus() != "pending" {
		t.Fatalf("the history, having missed the success, says %s", d.GetStatus())
	}

	rep := n.reconcile(t, &controlv1.ReconcileRequest{})
	want := []string{reconcile.KindDueAfterEnd, reconcile.KindHistoryStatus, reconcile.KindProjectionDiverged, reconcile.KindProjectionDiverged}
	slices.Sort(want)
	if rep.GetClean() || !slices.Equal(kinds(rep), want) {
		t.Fatalf("report: kinds %v, want %v\n%v", kinds(rep), want, rep)
	}
	for _, d := range rep.GetDiscrepancies() {
		if !slices.Contains(d.GetDeliveryIds(), id) {
			t.Errorf("%s does not name %s: %v", d.GetKind(), id, d)
		}
	}
	diverged := 0
	for _, p := range rep.GetProjections() {
		if p.GetDiffering() > 0 {
			diverged++
			if p.GetNodeDigest() == p.GetReplayDigest() {
				t.Errorf("%s differs with equal digests: %v", p.GetName(), p)
			}
		}
	}
	if diverged != 2 {
		t.Errorf("projections diverged: %d, want 2 (due and history): %v", diverged, rep.GetProjections())
	}

	rep = n.reconcile(t, &controlv1.ReconcileRequest{Repair: true})
	if rep.GetRepaired() != 4 {
		t.Fatalf("repair run: %v", rep)
	}
	if got := repairsIn(t, n, rep.GetRunId()); len(got) != 2 || got[0].GetKind() != hooklinev1.ReconcileRepaired_KIND_REBUILT {
		t.Errorf("repairs recorded: %v", got)
	}
	rep = n.reconcile(t, &controlv1.ReconcileRequest{})
	if !rep.GetClean() {
		t.Fatalf("second run: %v", rep)
	}
	for _, p := range rep.GetProjections() {
		if p.GetNodeDigest() != p.GetReplayDigest() || p.GetNodeEntries() != p.GetReplayEntries() {
			t.Errorf("after the rebuild %s: %v", p.GetName(), p)
		}
	}
	c.waitDelivery(t, id, "succeeded", hasStatus("succeeded"))
	// The rebuilt due index no longer hands the delivery out: publish
	// another and see both settle with one request each.
	c.publish(t, "e2", "a")
	eventually(t, 10*time.Second, "e2 delivered", func() bool { return rc.onPath("/ep_1") == 2 })
	if got := rc.count(id); got != 1 {
		t.Errorf("%s was requested %d times, want once", id, got)
	}
}

// TestReconcileAdminOnly: a tenant's key cannot reconcile.
func TestReconcileAdminOnly(t *testing.T) {
	n := startE2E(t, node.Config{ReconcileEvery: -1})
	c := n.tenant(t, "acme", nil)
	ctx, cancel := context.WithTimeout(c.ctx(), 10*time.Second)
	defer cancel()
	if _, err := controlv1.NewReconcileServiceClient(n.cc).Reconcile(ctx, &controlv1.ReconcileRequest{}); err == nil || !strings.Contains(err.Error(), "admin") {
		t.Errorf("reconcile with a tenant key: %v, want PERMISSION_DENIED", err)
	}
}
