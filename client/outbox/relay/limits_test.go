package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/client/outbox/relay"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestLimitedTenant: two relays and the tenant's portal hammer one
// tenant's bound of calls in flight, which they all share. The relays are
// refused for the bound again and again, back off and try again: every
// committed row becomes one event, and none is marked refused.
func TestLimitedTenant(t *testing.T) {
	const limit, rows = 4, 200
	ob := clienttest.NewOutbox(t, 16) // skips without PostgreSQL, before a node starts
	n := clienttest.Start(t, clienttest.Options{MaxInFlightPerCaller: limit})
	key := n.Tenant(t, "acme")
	e := &env{node: n, ob: ob, key: key, c: n.Client(t, key)}

	portal := n.Client(t, issuePortalToken(t, n.Addr, "acme"), client.Config{MaxAttempts: 1})
	pctx, stopPortal := context.WithCancel(context.Background())
	var hammering sync.WaitGroup
	var portalCalls, portalRefused atomic.Int64
	for range 2 * limit {
		hammering.Go(func() {
			for pctx.Err() == nil {
				_, err := portal.ListEndpoints(pctx, &controlv1.ListEndpointsRequest{})
				portalCalls.Add(1)
				switch {
				case errors.Is(err, client.ErrLimited):
					portalRefused.Add(1)
				case err != nil && pctx.Err() == nil:
					t.Errorf("portal: %v", err)
				}
			}
		})
	}
	t.Cleanup(func() { stopPortal(); hammering.Wait() })

	relays := []*relay.Worker{
		e.worker(t, relay.Config{BatchSize: 10, Client: n.Client(t, key)}),
		e.worker(t, relay.Config{BatchSize: 10, Client: n.Client(t, key)}),
	}
	for _, w := range relays {
		run(t, w)
	}
	var ids []string
	var mu sync.Mutex
	var producers sync.WaitGroup
	for p := range 4 {
		producers.Go(func() {
			for i := range rows / 4 {
				id := fmt.Sprintf("p%d_%03d", p, i)
				e.commitOne(t, id)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	producers.Wait()
	e.waitDrained(t, 3*time.Minute)
	stopPortal()
	hammering.Wait()

	if n := e.count(t, "refused_at IS NOT NULL"); n != 0 {
		t.Errorf("%d rows marked refused, want none: a limit's refusal is no row's fault", n)
	}
	e.checkExactlyOnce(t, ids, nil)
	var published, failures int64
	for _, w := range relays {
		s := w.Stats()
		published += s.Published + s.Duplicates
		failures += s.Failures
		if s.Refused != 0 {
			t.Errorf("relay stats %+v, want nothing refused", s)
		}
	}
	if published != rows {
		t.Errorf("relays published %d rows, want %d", published, rows)
	}
	if portalRefused.Load() == 0 {
		t.Fatalf("the portal was never refused in %d calls: the test did not reach the bound", portalCalls.Load())
	}
	t.Logf("portal: %d calls, %d refused for the bound; relay batches that failed and waited: %d", portalCalls.Load(), portalRefused.Load(), failures)
}

// issuePortalToken issues a read-only portal token of tenantID with the
// admin token.
func issuePortalToken(t *testing.T, addr, tenantID string) string {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+clienttest.AdminToken), 30*time.Second)
	defer cancel()
	r, err := controlv1.NewPortalServiceClient(cc).IssuePortalToken(ctx, &controlv1.IssuePortalTokenRequest{TenantId: tenantID, Label: "relay test"})
	if err != nil {
		t.Fatalf("issue a portal token: %v", err)
	}
	return r.GetPortalToken()
}
