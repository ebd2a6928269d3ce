package e2e_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestRecoveryResumedUnasked: a node that stopped right after a recovery's
// RecoveryStarted (its list recorded, no ReplayRequested yet: nothing is
// due, so the due index wakes nobody) resumes it after its restart without
// anyone asking about the endpoint: the node wakes the endpoints whose
// recovery runs.
func TestRecoveryResumedUnasked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	cfg := node.Config{DataDir: dir, Schedule: attempt.Schedule{MaxAttempts: 1}}
	node, stop := runE2E(t, cfg)
	rc := newHookReceiver(t, nil)
	acme := node.tenant(t, "acme", nil)
	var ok atomic.Bool
	acme.endpoint(t, rc, "win", []string{"order.paid"}, nil, func(w http.ResponseWriter, _ *http.Request, _ int) {
		if !ok.Load() {
			w.WriteHeader(http.StatusBadRequest) // permanent: ends failed
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	var ids []string
	for _, e := range []string{"ord_1", "ord_2", "ord_3"} {
		ids = append(ids, acme.publish(t, e, "order.paid")...)
	}
	eventually(t, 20*time.Second, "three failed deliveries", func() bool { return len(acme.list(t, "failed")) == 3 })
	stop()

	// What the grain writes when it starts a recovery, and nothing after:
	// the node stopped there.
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	epID, rid, ctx := acme.ids["win"], "rcv_00000000000000aa", context.Background()
	at := timestamppb.Now()
	listed, err := events.EncodeIn(&hooklinev1.RecoveryListed{
		TenantId: acme.id, EndpointId: epID, RecoveryId: rid, Chunk: 0, Chunks: 1, DeliveryIds: ids, At: at,
	}, "test.listed/"+rid, events.RecoveryStream(rid), events.PartitionOf(epID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, events.RecoveryStream(rid), events.NoStream{}, listed); err != nil {
		t.Fatal(err)
	}
	recs, err := l.ReadStream(ctx, events.EndpointStream(epID), events.Backwards, events.End, 1)
	if err != nil {
		t.Fatal(err)
	}
	started, err := events.Encode(&hooklinev1.RecoveryStarted{
		TenantId: acme.id, EndpointId: epID, RecoveryId: rid, Since: timestamppb.New(at.AsTime().Add(-time.Hour)), Until: at,
		At: at, Statuses: []string{"failed"}, Deliveries: int64(len(ids)), Digest: endpoint.ListDigest(ids),
	}, "test.started/"+rid, events.EndpointStream(epID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, events.EndpointStream(epID), events.Exact(recs[0].Revision), started); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	ok.Store(true)
	runE2E(t, cfg)
	eventually(t, 30*time.Second, "the recovery's replays received", func() bool {
		for _, id := range ids {
			if rc.count(id) != 2 { // the failed attempt and the replay
				return false
			}
		}
		return true
	})
}
