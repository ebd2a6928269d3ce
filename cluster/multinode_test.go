package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/cluster/memberlist"
)

// Multi-node tests run the second node in a child process: this test binary
// re-executed with childEnv set. One process cannot host two started nodes
// under the race detector, because protoactor's remote.Start sets gRPC's
// global logger (grpclog.SetLoggerV2) on every start while the first
// node's gRPC goroutines read it. Separate processes are also closer to
// production: one node per process, talking over loopback.
//
// The child speaks a line protocol: it prints "ready <address> <gossip>",
// then answers each command on stdin with one line:
//
//	ask <identity>  -> "answer <address>" or "error <message>"
//	members         -> "members <count>"
//	stop            -> "stopped <duration>", then it exits
//
// When stdin closes (the parent went away) it stops and exits.
const childEnv = "HOOKLINE_CLUSTER_TEST_CHILD" // value: seeds, comma separated

// childSecretEnv, when set, is the child's cluster secret (the format of
// cluster.ParseSecrets).
const childSecretEnv = "HOOKLINE_CLUSTER_TEST_SECRET"

func TestMain(m *testing.M) {
	if seeds, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(seeds))
	}
	os.Exit(m.Run())
}

func runChild(seeds string) int {
	cfg := testConfig(strings.Split(seeds, ","))
	if spec := os.Getenv(childSecretEnv); spec != "" {
		secrets, err := cluster.ParseSecrets(spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child node:", err)
			return 1
		}
		cfg.Secrets = secrets
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n, err := cluster.Start(ctx, cfg)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child node:", err)
		return 1
	}
	fmt.Printf("ready %s %s\n", n.Address(), n.GossipAddress())
	stop := func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := n.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "child node:", err)
		}
		return time.Since(start)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "ask":
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			where, err := ask(ctx, n, arg)
			cancel()
			if err != nil {
				fmt.Printf("error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				fmt.Printf("answer %s\n", where)
			}
		case "members":
			fmt.Printf("members %d\n", len(n.Members()))
		case "ready":
			if err := n.Ready(); err != nil {
				fmt.Printf("error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				fmt.Println("ready")
			}
		case "stop":
			fmt.Printf("stopped %s\n", stop())
			return 0
		default:
			fmt.Printf("error unknown command %q\n", cmd)
		}
	}
	stop()
	return 0
}

// child is a node running in a child process.
type child struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      io.WriteCloser
	lines   <-chan string
	exited  chan struct{} // closed when the process has been waited for
	address string        // protoactor remote address
	gossip  string        // memberlist address
}

func startChild(t *testing.T, seeds ...string) *child {
	t.Helper()
	return startChildWith(t, "", seeds...)
}

// startChildWith starts a child whose cluster secret is secret (none when
// empty).
func startChildWith(t *testing.T, secret string, seeds ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(seeds, ","), childSecretEnv+"="+secret,
		// The race detector pauses a second at exit by default.
		"GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("child stdin: %v", err)
	}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	c := &child{t: t, cmd: cmd, in: in, exited: make(chan struct{})}
	lines := make(chan string)
	c.lines = lines
	go func() { // ends when the child's stdout closes
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	go func() { // ends when the child exits
		_ = cmd.Wait()
		pw.Close()
		close(c.exited)
	}()
	t.Cleanup(c.close)

	ready := c.read()
	fields := strings.Fields(ready)
	if len(fields) != 3 || fields[0] != "ready" {
		t.Fatalf("child said %q, want ready <address> <gossip>", ready)
	}
	c.address, c.gossip = fields[1], fields[2]
	return c
}

// read returns the child's next line, failing the test after a deadline.
func (c *child) read() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("child exited")
		}
		return l
	case <-time.After(20 * time.Second):
		c.t.Fatal("child did not answer within 20s")
		return ""
	}
}

func (c *child) call(format string, args ...any) string {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.in, format+"\n", args...); err != nil {
		c.t.Fatalf("write to child: %v", err)
	}
	return c.read()
}

func (c *child) ask(identity string) (string, error) {
	c.t.Helper()
	reply := c.call("ask %s", identity)
	if where, ok := strings.CutPrefix(reply, "answer "); ok {
		return where, nil
	}
	return "", fmt.Errorf("child: %s", reply)
}

func (c *child) members() int {
	c.t.Helper()
	reply := c.call("members")
	n, err := strconv.Atoi(strings.TrimPrefix(reply, "members "))
	if err != nil {
		c.t.Fatalf("child said %q, want members <count>", reply)
	}
	return n
}

// beginStop asks the child's node to stop gracefully, without waiting.
func (c *child) beginStop() {
	c.t.Helper()
	if _, err := fmt.Fprintln(c.in, "stop"); err != nil {
		c.t.Fatalf("write to child: %v", err)
	}
}

// endStop waits for the stop begun by beginStop and for the process to
// exit; it returns the duration of the child's Stop.
func (c *child) endStop() time.Duration {
	c.t.Helper()
	reply := c.read()
	d, err := time.ParseDuration(strings.TrimPrefix(reply, "stopped "))
	if err != nil {
		c.t.Fatalf("child said %q, want stopped <duration>", reply)
	}
	c.waitExit()
	return d
}

// kill ends the child without letting it leave: a crashed member.
func (c *child) kill() {
	c.t.Helper()
	_ = c.cmd.Process.Kill()
	c.waitExit()
}

func (c *child) waitExit() {
	c.t.Helper()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.t.Error("child did not exit within 10s")
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// close ends the child if a test left it running: closing stdin asks for a
// graceful stop; a child that does not exit in time is killed.
func (c *child) close() {
	c.in.Close()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.t.Error("child did not exit within 10s of stdin closing")
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

func identities(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("endpoint-%02d", i)
	}
	return ids
}

// waitTwo polls until the in-process node and the child both see two
// members.
func waitTwo(t *testing.T, a *cluster.Node, b *child) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(a.Members()) != 2 || b.members() != 2 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no cluster of two within 10s: a sees %+v, b sees %d", a.Members(), b.members())
		}
		<-tick.C
	}
	return time.Since(start)
}

// askBoth requests identity's echo through the in-process node a and the
// child b, and returns the addresses of the members that answered.
func askBoth(ctx context.Context, t *testing.T, a *cluster.Node, b *child, identity string) (viaA, viaB string) {
	t.Helper()
	viaA, err := ask(ctx, a, identity)
	if err != nil {
		t.Fatalf("request %s via a: %v", identity, err)
	}
	viaB, err = b.ask(identity)
	if err != nil {
		t.Fatalf("request %s via b: %v", identity, err)
	}
	return viaA, viaB
}

func TestTwoNodesShareAndHandOverGrains(t *testing.T) {
	a := startNode(t)
	spawned := time.Now()
	b := startChild(t, a.GossipAddress())
	ready := time.Since(spawned)
	formed := waitTwo(t, a, b)
	t.Logf("cluster of two formed %v after spawning the second node's process (its Start returned after %v, which includes protoactor's fixed 1 s pause)",
		ready+formed, ready)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Every identity answers through either node, from the same owner,
	// and the owners are spread over both members.
	ids := identities(50)
	owner := make(map[string]string, len(ids))
	perMember := map[string]int{}
	for _, id := range ids {
		viaA, viaB := askBoth(ctx, t, a, b, id)
		if viaA != viaB {
			t.Errorf("%s answered from %s via a but from %s via b", id, viaA, viaB)
		}
		owner[id] = viaA
		perMember[viaA]++
	}
	t.Logf("placement of %d grains: %v", len(ids), perMember)
	if perMember[a.Address()] == 0 || perMember[b.address] == 0 {
		t.Fatalf("grains were not all placed on the two members %s and %s: %v", a.Address(), b.address, perMember)
	}

	// Stop b gracefully: its leave is gossiped first, so a drops it at
	// once, while b's Stop is still running, and re-activates its grains.
	stopStart := time.Now()
	b.beginStop()
	left := waitMembers(t, 10*time.Second, 1, a)
	t.Logf("survivor dropped the leaving member %v after its Stop began", left)

	moved := 0
	var slowest time.Duration
	for _, id := range ids {
		asked := time.Now()
		where, err := ask(ctx, a, id)
		slowest = max(slowest, time.Since(asked))
		if err != nil {
			t.Fatalf("request %s via the survivor: %v", id, err)
		}
		if where != a.Address() {
			t.Errorf("%s answered from %s, want the survivor %s", id, where, a.Address())
		}
		if owner[id] == b.address {
			moved++
		}
	}
	t.Logf("all %d grains answered from the survivor %v after the stop began; %d were re-activated there; slowest request %v",
		len(ids), time.Since(stopStart), moved, slowest)
	t.Logf("child's Stop took %v", b.endStop())
}

// TestStartingMemberHostsNothingUntilReady: a member started warming
// (cluster.Config.Warming) hosts no grain placed by identity while a
// member that is ready can, seen from either member, and takes its share
// once it says it is ready. A node that joins under load would otherwise
// host tenant grains from the moment it joins the gossip, a second before
// its actor system answers and while it catches up, and every endpoint of
// those tenants waits on it for its quota leases. The ready member sees
// another ready (OthersReady) only once the starting one says it is.
func TestStartingMemberHostsNothingUntilReady(t *testing.T) {
	a := startNode(t)
	if err := a.Ready(); err != nil {
		t.Fatalf("ready: %v", err)
	}
	b := startChild(t, a.GossipAddress()) // warming, not ready
	waitTwo(t, a, b)
	if a.OthersReady() {
		t.Fatal("a sees another member ready while b starts")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ids := identities(30)
	for _, id := range ids {
		viaA, viaB := askBoth(ctx, t, a, b, id)
		if viaA != a.Address() || viaB != a.Address() {
			t.Fatalf("%s answered from %s via a and %s via b while b starts; want the ready member %s for both", id, viaA, viaB, a.Address())
		}
	}

	b.call("ready")
	deadline := time.Now().Add(10 * time.Second)
	for {
		onB := 0
		for _, id := range ids {
			where, err := ask(ctx, a, id)
			if err != nil {
				t.Fatalf("request %s via a: %v", id, err)
			}
			if where == b.address {
				onB++
			}
		}
		if onB > 0 {
			t.Logf("%d of %d grains on the member once it was ready", onB, len(ids))
			if !a.OthersReady() {
				t.Fatal("a places grains on b but does not see another member ready")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no grain placed on %s within 10 s of its being ready", b.address)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestCrashedMemberGrainsMove(t *testing.T) {
	a := startNode(t)
	b := startChild(t, a.GossipAddress())
	waitTwo(t, a, b)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var onB []string
	for _, id := range identities(20) {
		where, err := ask(ctx, a, id)
		if err != nil {
			t.Fatalf("request %s: %v", id, err)
		}
		if where == b.address {
			onB = append(onB, id)
		}
	}
	if len(onB) == 0 {
		t.Fatal("no grain was placed on the child")
	}

	// Kill b: no leave is gossiped, so a learns of it only through
	// memberlist's failure detection. Requests meanwhile may fail; poll
	// until every grain of b answers from a.
	killed := time.Now()
	b.kill()
	failures := 0
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range onB {
		for {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			where, err := ask(rctx, a, id)
			rcancel()
			if err == nil && where == a.Address() {
				break
			}
			failures++
			if time.Now().After(deadline) {
				t.Fatalf("%s did not move to the survivor within 20s of the crash: last answer %q, error %v", id, where, err)
			}
		}
	}
	t.Logf("%d grains of the crashed member answered from the survivor %v after the kill (%d failed requests before)",
		len(onB), time.Since(killed), failures)
	if n := len(a.Members()); n != 1 {
		t.Errorf("survivor sees %d members, want 1", n)
	}
}

// TestKilledMemberLeavesOnRefusal: a member whose process ended refuses
// connections on its ports, and the survivor drops it at once, long before
// its failure detector could: here memberlist is slowed to need over ten
// seconds, and the member must be gone within five.
func TestKilledMemberLeavesOnRefusal(t *testing.T) {
	cfg := testConfig(nil)
	cfg.Gossip = memberlist.Timing{ProbeInterval: 5 * time.Second, ProbeTimeout: 2 * time.Second,
		GossipInterval: 50 * time.Millisecond, SuspicionMult: 4, LeaveTimeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = a.Stop(sctx)
	})
	b := startChild(t, a.GossipAddress())
	waitTwo(t, a, b)
	var onB string
	for _, id := range identities(20) {
		where, err := ask(ctx, a, id)
		if err != nil {
			t.Fatalf("request %s: %v", id, err)
		}
		if where == b.address {
			onB = id // a now holds a connection to b's actor port
			break
		}
	}
	if onB == "" {
		t.Fatal("no grain was placed on the child")
	}

	killed := time.Now()
	b.kill()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(a.Members()) != 1 {
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("the survivor still lists the killed member %v after the kill (memberlist alone needs over 10s)", time.Since(killed))
		}
		<-tick.C
	}
	gone := time.Since(killed)
	where, err := ask(ctx, a, onB)
	if err != nil || where != a.Address() {
		t.Fatalf("grain %s of the killed member: answered from %q, error %v; want the survivor", onB, where, err)
	}
	t.Logf("the killed member left the survivor's topology %v after the kill", gone)
}
