package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/cluster/memberlist"
)

// echoKind is the test grain kind: it answers any StringValue with
// "identity@address", naming itself and the member it runs on.
const echoKind = "echo"

// Retired (cluster.Retire), it stops at once, but for an identity that
// starts with "lingering": that one stops lingerFor later, as a grain
// finishing work it cannot hand over would.
type echoGrain struct{ identity string }

// lingerFor is how long a lingering echo grain takes to stop once retired.
const lingerFor = 300 * time.Millisecond

// stopNow is a lingering echo grain's timer.
type stopNow struct{}

func (g *echoGrain) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pcluster.ClusterInit:
		g.identity = msg.Identity.Identity
	case *wrapperspb.StringValue:
		ctx.Respond(wrapperspb.String(g.identity + "@" + ctx.ActorSystem().Address()))
	case cluster.Retire:
		if strings.HasPrefix(g.identity, "lingering") {
			scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(lingerFor, ctx.Self(), stopNow{})
			return
		}
		ctx.Stop(ctx.Self())
	case stopNow:
		ctx.Stop(ctx.Self())
	}
}

func echoKinds() []*pcluster.Kind {
	return []*pcluster.Kind{
		pcluster.NewKind(echoKind, actor.PropsFromProducer(func() actor.Actor { return &echoGrain{} })),
	}
}

// testLogger shows warnings (protoactor's included) on stderr; set
// HOOKLINE_TEST_DEBUG=1 to see everything, memberlist's lines too.
func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("HOOKLINE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// fastGossip detects a dead member within about a second on loopback.
var fastGossip = memberlist.Timing{
	ProbeInterval:  200 * time.Millisecond,
	ProbeTimeout:   100 * time.Millisecond,
	GossipInterval: 50 * time.Millisecond,
	SuspicionMult:  2,
	LeaveTimeout:   time.Second,
}

// testConfig is a node on loopback with ports chosen by the system, the
// echo kind and fast failure detection.
func testConfig(seeds []string) cluster.Config {
	return cluster.Config{
		Name:           "test",
		Host:           "127.0.0.1",
		Port:           cluster.AnyPort,
		GossipPort:     cluster.AnyPort,
		Seeds:          slices.DeleteFunc(seeds, func(s string) bool { return s == "" }),
		Kinds:          echoKinds(),
		RequestTimeout: time.Second,
		Warming:        true, // ready when every member is, unless one says so
		Gossip:         fastGossip,
		Logger:         testLogger(),
	}
}

// startNode starts a node in this process and stops it at the end of the
// test. Only one node may run in the test process at a time (see
// multinode_test.go).
func startNode(t *testing.T, seeds ...string) *cluster.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := cluster.Start(ctx, testConfig(seeds))
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	// Stop is idempotent: for a node a test stopped already, this returns
	// at once.
	t.Cleanup(func() { stopNode(t, n) })
	return n
}

// stopNode stops n and fails the test unless Stop returns within a
// deadline: protoactor's graceful shutdown includes a fixed two-second
// pause, so ten seconds is generous.
func stopNode(t *testing.T, n *cluster.Node) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := n.Stop(ctx); err != nil {
		t.Errorf("stop node %s: %v", n.Address(), err)
	}
	return time.Since(start)
}

// ask requests identity's echo through n and returns the address of the
// member that answered.
func ask(ctx context.Context, n *cluster.Node, identity string) (string, error) {
	resp, err := n.Request(ctx, echoKind, identity, wrapperspb.String("ping"))
	if err != nil {
		return "", err
	}
	sv, ok := resp.(*wrapperspb.StringValue)
	if !ok {
		return "", fmt.Errorf("answer is %T, want *wrapperspb.StringValue", resp)
	}
	who, where, ok := strings.Cut(sv.GetValue(), "@")
	if !ok || who != identity {
		return "", fmt.Errorf("answer %q is not from grain %q", sv.GetValue(), identity)
	}
	return where, nil
}

// waitMembers polls until every node sees want members, or fails after
// the deadline.
func waitMembers(t *testing.T, deadline time.Duration, want int, nodes ...*cluster.Node) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok := true
		for _, n := range nodes {
			if len(n.Members()) != want {
				ok = false
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > deadline {
			for _, n := range nodes {
				t.Logf("node %s sees %+v", n.Address(), n.Members())
			}
			t.Fatalf("members did not converge to %d within %v", want, deadline)
		}
		<-tick.C
	}
}

func TestSingleNodeAnswers(t *testing.T) {
	n := startNode(t)

	members := n.Members()
	if len(members) != 1 || members[0].Address != n.Address() || members[0].ID != n.ID() {
		t.Fatalf("members = %+v, want only this node %s", members, n.Address())
	}
	if got := members[0].Kinds; len(got) != 1 || got[0] != echoKind {
		t.Errorf("kinds = %v, want [%s]", got, echoKind)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	where, err := ask(ctx, n, "endpoint-1")
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if where != n.Address() {
		t.Errorf("answered from %s, want %s", where, n.Address())
	}

	took := stopNode(t, n)
	t.Logf("stop took %v", took)
	if _, err := n.Request(ctx, echoKind, "endpoint-1", wrapperspb.String("ping")); !errors.Is(err, cluster.ErrStopped) {
		t.Errorf("request after stop: err = %v, want ErrStopped", err)
	}
}

func TestUnknownKindIsUnavailable(t *testing.T) {
	n := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.Request(ctx, "no-such-kind", "x", wrapperspb.String("ping"))
	if !errors.Is(err, cluster.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}
