package main_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var remoteLine = regexp.MustCompile(`msg="cluster node started" member_id=\S+ address=(\S+) .*secured=(\S+)`)

// clusterAddr returns the node's protoactor remote address (the cluster
// port) and whether the node says its cluster traffic is secured.
func (n *node) clusterAddr(t *testing.T) (string, bool) {
	t.Helper()
	m := remoteLine.FindStringSubmatch(n.output())
	if m == nil {
		t.Fatalf("no \"cluster node started\" line with an address in the node's log:\n%s", n.output())
	}
	return m[1], m[2] == "true"
}

// TestClusterPortRefusesNonMembers runs `hookline serve` nodes with the
// cluster secret and processes that are not members: one with another
// secret, one with none. The outsiders never join (gossip is encrypted),
// and the cluster port does not answer a plain gRPC call, so nobody
// without the secret can send IssueKey to a tenant grain or Rotate to an
// endpoint grain. A node with the secret joins.
func TestClusterPortRefusesNonMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	f := newFleet(t)
	a := f.start(t.TempDir())
	addr, secured := a.clusterAddr(t)
	if !secured {
		t.Fatalf("the node with a cluster secret says its traffic is not secured:\n%s", a.output())
	}

	t.Run("a plain gRPC call to the cluster port fails", func(t *testing.T) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		stream, err := remote.NewRemotingClient(cc).Receive(ctx)
		if err == nil {
			_, err = stream.Recv()
		}
		if err == nil {
			t.Fatal("the cluster port opened a message stream for a plaintext caller")
		}
		t.Logf("refused: %v", err)
	})

	for _, tt := range []struct{ name, secret string }{
		{"a node with another secret", randomBase64(32)},
		{"a node with no secret", ""},
	} {
		t.Run(tt.name+" does not become a member", func(t *testing.T) {
			o := f.startWith(t.TempDir(), []string{"HOOKLINE_CLUSTER_SECRET=" + tt.secret}, a.gossip(t))
			defer o.stop(t)
			// memberlist probes every second and retries the join every
			// second: five seconds of it, and neither side sees the other.
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if got := a.members(); !slices.Equal(got, []string{a.memberID(t)}) {
					t.Fatalf("the member sees %v", got)
				}
				if got := o.members(); !slices.Equal(got, []string{o.memberID(t)}) {
					t.Fatalf("the outsider sees %v", got)
				}
			}
		})
	}

	// b runs until the end of the test: its data directory must outlive the
	// subtest (a directory removed under a running node makes its stop
	// hang on the projection store's flush).
	bDir := t.TempDir()
	t.Run("a node with the secret joins", func(t *testing.T) {
		b := f.start(bDir, a.gossip(t))
		waitMembers(t, a, b)
	})
}
