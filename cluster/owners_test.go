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

// startOwned starts a node that places the echo kind by partition, on a
// table that names it for every partition, and has it answer for grain id
// once; the context ends with the test (20 s at most).
func startOwned(t *testing.T, id string) (context.Context, *cluster.Node, *tableOwners) {
	t.Helper()
	owners := &tableOwners{moved: map[events.Partition]string{}}
	cfg := testConfig(nil)
	cfg.PartitionedKind, cfg.Owners = echoKind, owners
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	n, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopNode(t, n) })
	owners.mu.Lock()
	owners.self = n.Address()
	owners.mu.Unlock()
	if where, err := ask(ctx, n, id); err != nil || where != n.Address() {
		t.Fatalf("before the move: answered from %q (%v), want %s", where, err, n.Address())
	}
	return ctx, n, owners
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
	const id = "ep_moving"
	ctx, n, owners := startOwned(t, id)
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

// TestARetiredGrainFinishesFirst: a grain of the partitioned kind whose
// partition moved away is retired, not stopped: it may finish what it
// cannot hand over. While it does, no other grain of its identity starts
// on this member, even once the partition is back (two copies would
// attempt the same deliveries); once it has stopped, the member starts
// the grain again by itself, so that its due work is pulled without
// waiting for a request.
func TestARetiredGrainFinishesFirst(t *testing.T) {
	const id = "lingering_ep"
	ctx, n, owners := startOwned(t, id)
	ci := pcluster.NewClusterIdentity(id, echoKind)
	activate := func() any {
		t.Helper()
		res, err := n.ActorSystem().Root.RequestFuture(actor.NewPID(n.Address(), "hookline-placement"),
			&pcluster.ActivationRequest{ClusterIdentity: ci}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	retired := time.Now()
	owners.move(events.PartitionOf(id), "127.0.0.1:1")
	n.Rebalance()
	activate()                                       // answered after the rebalance: the grain is retired
	owners.move(events.PartitionOf(id), n.Address()) // and back at once

	res := activate()
	if resp, ok := res.(*pcluster.ActivationResponse); !ok || !resp.Failed {
		if time.Since(retired) < lingerFor {
			t.Fatalf("activation answered %v while the retired grain still ran; want a refusal", res)
		}
		t.Skipf("the retired grain stopped before the activation was asked (%v): nothing to check", time.Since(retired))
	}
	if got := n.Active(echoKind); got != 1 {
		t.Errorf("%d grains active while the retired one finishes; want that one alone", got)
	}
	// Once it stops, the member starts it again by itself.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if resp, ok := activate().(*pcluster.ActivationResponse); ok && !resp.Failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the grain was not started again within 5 s of its retirement")
		}
		time.Sleep(10 * time.Millisecond) // a poll interval
	}
	if got := n.Active(echoKind); got != 1 {
		t.Errorf("%d grains active after the retired one stopped; want one", got)
	}
	if where, err := ask(ctx, n, id); err != nil || where != n.Address() {
		t.Errorf("after the retired grain stopped: answered from %q (%v), want %s", where, err, n.Address())
	}
}
