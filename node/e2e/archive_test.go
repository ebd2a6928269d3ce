package e2e_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestArchiveReplay runs a node with a 1-minute retention and a file://
// archive. An event delivered, then dropped from the log by retention,
// is still read (GET /v1/events/{id} says it came from the archive), a
// window recovery's dry run counts its delivery and says it is in the
// archive, and a replay, on a node restarted since (nothing of it in
// memory), sends the same webhook-id and the same bytes, its attempt
// recording that the bytes came from the archive.
func TestArchiveReplay(t *testing.T) {
	clk := &clock{now: time.Now().UTC()}
	archiveDir := filepath.Join(t.TempDir(), "archive")
	cfg := node.Config{
		DataDir: filepath.Join(t.TempDir(), "node"), Now: clk.Now, SweepInterval: e2eSweep, StaleAfter: e2eStale,
		Retention: time.Minute, RetainEvery: 50 * time.Millisecond,
		Archive: "file://" + archiveDir + "?create_dir=1",
	}
	n, stop := runE2E(t, cfg)
	rc := newHookReceiver(t, clk.Now)
	c := n.tenant(t, "acme", nil)
	c.endpoint(t, rc, "archived_ep", []string{"order.paid"}, nil, answer(http.StatusOK))
	ids := c.publish(t, "evt_old", "order.paid")
	if len(ids) != 1 {
		t.Fatalf("planned %v", ids)
	}
	delivered := c.waitDelivery(t, ids[0], "delivered", hasStatus("succeeded"))
	first := rc.receipts(ids[0])
	if len(first) != 1 {
		t.Fatalf("receipts before retention: %d", len(first))
	}

	clk.Add(2 * time.Minute)
	stream := events.EventStream("acme", "evt_old")
	eventually(t, 20*time.Second, "retention drops the event's stream", func() bool {
		_, err := n.srv.Log().ReadStream(t.Context(), stream, events.Forwards, 0, 1)
		return errors.Is(err, events.ErrStreamNotFound)
	})
	stop()

	n2, stop2 := runE2E(t, cfg)
	c = c.on(n2)
	code, got := n2.rest(t, http.MethodGet, c.key, "/v1/events/evt_old", nil)
	payload, _ := base64.StdEncoding.DecodeString(got["payload"].(string))
	if code != http.StatusOK || got["from_archive"] != true || !bytes.Equal(payload, first[0].body) {
		t.Fatalf("GET an event past retention: %d %v", code, got)
	}

	if r, err := c.events.ExplainRouting(c.ctx(), &controlv1.ExplainRoutingRequest{EventId: "evt_old"}); err != nil || !r.GetFromArchive() || len(r.GetEndpoints()) != 1 {
		t.Fatalf("the routing of an event past retention: %v, %v", r, err)
	}

	planned := delivered.GetPlannedAt().AsTime()
	// n2 is a new member (new ports): until it has taken the partitions
	// over from n1, which the table still names, the endpoint's grain is
	// served by no member and the call answers UNAVAILABLE: retry.
	var dry *controlv1.Recovery
	var err error
	eventually(t, 20*time.Second, "the window's dry run served", func() bool {
		dry, err = c.endpoints.RecoverEndpoint(c.ctx(), &controlv1.RecoverEndpointRequest{
			EndpointId: c.ids["archived_ep"], Since: timestamppb.New(planned.Add(-time.Minute)), Until: timestamppb.New(planned.Add(time.Minute)),
			Statuses: []string{"succeeded"}, DryRun: true,
		})
		return status.Code(err) != codes.Unavailable
	})
	if err != nil || dry.GetManifest().GetDeliveries() != 1 || dry.GetManifest().GetFromArchive() != 1 {
		t.Fatalf("the window's dry run: %v, %v; want 1 delivery, from the archive", dry.GetManifest(), err)
	}

	if _, err := c.deliveries.ReplayDelivery(c.ctx(), &controlv1.ReplayDeliveryRequest{DeliveryId: ids[0]}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	eventually(t, 20*time.Second, "the replay arrives", func() bool { return rc.count(ids[0]) == 2 })
	again := rc.receipts(ids[0])[1]
	if again.id != first[0].id || !bytes.Equal(again.body, first[0].body) {
		t.Fatalf("the replay sent %s %q; the first attempt %s %q", again.id, again.body, first[0].id, first[0].body)
	}
	d := c.waitDelivery(t, ids[0], "the replay recorded", func(d *controlv1.Delivery) bool {
		a := d.GetAttempts()
		return len(a) > 0 && a[len(a)-1].GetManual()
	})
	if last := d.GetAttempts()[len(d.GetAttempts())-1]; !last.GetFromArchive() {
		t.Fatalf("the replay's attempt does not say its bytes came from the archive: %v", last)
	}

	// Reconciliation counts what retention dropped against the archive:
	// clean while the archive holds it, archive_missing once it is gone.
	rep := reconcileReport(t, n2)
	if !rep.GetClean() || archiveCheck(rep).GetExamined() != 1 {
		t.Fatalf("reconcile with the archive whole: clean %v, %v; checks %v", rep.GetClean(), rep.GetDiscrepancies(), rep.GetChecks())
	}
	stop2()
	if err := os.RemoveAll(filepath.Join(archiveDir, "index")); err != nil {
		t.Fatal(err)
	}
	n3, _ := runE2E(t, cfg)
	// n3 is a new member (new ports): it serves the partitions once it
	// has taken them over from n2, which the table still names; a
	// reconcile before then covers none of them and says so.
	eventually(t, 20*time.Second, "n3 reconciles every partition", func() bool {
		rep = reconcileReport(t, n3)
		return !slices.ContainsFunc(rep.GetNotes(), func(n string) bool { return strings.Contains(n, "reconciled by no node") })
	})
	if c := archiveCheck(rep); rep.GetClean() || c.GetDiscrepancies() != 1 || rep.GetDiscrepancies()[0].GetKind() != "archive_missing" {
		t.Fatalf("reconcile with the archive emptied: clean %v, %v; checks %v", rep.GetClean(), rep.GetDiscrepancies(), rep.GetChecks())
	}
}

func archiveCheck(rep *controlv1.ReconcileReport) *controlv1.ReconcileCheck {
	for _, c := range rep.GetChecks() {
		if c.GetName() == "archive" {
			return c
		}
	}
	return nil
}

// on returns the tenant's client calling another node (the same node
// restarted): the same key, endpoints and planned deliveries.
func (c *tenantClient) on(n *e2eNode) *tenantClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &tenantClient{
		t: c.t, id: c.id, key: c.key,
		events: controlv1.NewEventServiceClient(n.cc), endpoints: controlv1.NewEndpointServiceClient(n.cc),
		deliveries: controlv1.NewDeliveryServiceClient(n.cc), catalog: controlv1.NewEventTypeServiceClient(n.cc),
		planned: maps.Clone(c.planned), ids: maps.Clone(c.ids), names: maps.Clone(c.names),
	}
}

func reconcileReport(t *testing.T, n *e2eNode) *controlv1.ReconcileReport {
	t.Helper()
	adm := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e2eAdmin)
	rep, err := controlv1.NewReconcileServiceClient(n.cc).Reconcile(adm, &controlv1.ReconcileRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
