package cluster_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
)

// tableOwners is a partition table a test changes: every partition is
// owned by self unless moved.
type tableOwners struct {
	mu    sync.Mutex
	self  string
	moved map[events.Partition]string
}

func (o *tableOwners) Owner(p events.Partition) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if to, ok := o.moved[p]; ok {
		return to
	}
	return o.self
}

func (o *tableOwners) move(p events.Partition, to string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.moved[p] = to
}

// TestOnlyTheOwnerRunsAPartitionsGrains: a member runs a grain of the
// partitioned kind only while the partition table names it. When the
// table moves the partition to another member, the PID this node cached
// for the grain is not used (a request goes to the new owner, here an
// address nobody answers, and fails UNAVAILABLE, instead of reaching the
// stale copy still active here), the copy stops on Rebalance, and an
// activation request that a member with a lagging table sends here is
// refused, not answered with a second copy.
func TestOnlyTheOwnerRunsAPartitionsGrains(t *testing.T) {
	owners := &tableOwners{moved: map[events.Partition]string{}}
	cfg := testConfig(nil)
	cfg.PartitionedKind, cfg.Owners = echoKind, owners
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopNode(t, n) })
	owners.mu.Lock()
	owners.self = n.Address()
	owners.mu.Unlock()

	const id = "ep_moving"
	if where, err := ask(ctx, n, id); err != nil || where != n.Address() {
		t.Fatalf("before the move: answered from %q (%v), want %s", where, err, n.Address())
	}
	gone := "127.0.0.1:1" // nobody answers there
	owners.move(events.PartitionOf(id), gone)

	t.Run("a request reaches the new owner, not the stale copy", func(t *testing.T) {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		where, err := ask(rctx, n, id)
		if err == nil {
			t.Fatalf("answered from %s after the partition moved to %s: a stale copy still runs", where, gone)
		}
		if !errors.Is(err, cluster.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want ErrUnavailable (the new owner does not answer)", err)
		}
	})
	t.Run("the stale copy stops", func(t *testing.T) {
		n.Rebalance()
		deadline := time.Now().Add(5 * time.Second)
		for n.Active(echoKind) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d grains still active here 5 s after the partition moved away", n.Active(echoKind))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("an activation asked by a member whose table lags is refused", func(t *testing.T) {
		ci := pcluster.NewClusterIdentity(id, echoKind)
		res, err := n.ActorSystem().Root.RequestFuture(actor.NewPID(n.Address(), "hookline-placement"),
			&pcluster.ActivationRequest{ClusterIdentity: ci}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if resp, ok := res.(*pcluster.ActivationResponse); !ok || !resp.Failed {
			t.Errorf("activation answered %v, want a refusal: the partition is %s's", res, gone)
		}
	})
	t.Run("the grain comes back when the partition does", func(t *testing.T) {
		owners.move(events.PartitionOf(id), n.Address())
		if where, err := ask(ctx, n, id); err != nil || where != n.Address() {
			t.Errorf("after the move back: answered from %q (%v), want %s", where, err, n.Address())
		}
	})
}
