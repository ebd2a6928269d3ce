package main_test

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Failover of real `hookline serve` processes: three nodes on loopback,
// memberlist membership, one PostgreSQL log.
// Each test runs a paced publisher through the nodes' APIs while it stops a
// node, and then checks the contract against the receivers and the log:
// nothing lost (counted against the test's own ledger: every event to
// every subscribed hook, with the published bytes, not against what the
// node said it planned), every delivery ended with exactly one success, and
// duplicates only where an attempt was cut short, with its webhook-id.
// The figures (failover time, duplicates) are logged with the prefix
// "FIGURE".

const (
	// fleetHooks endpoints spread over three nodes by rendezvous hashing;
	// each event goes to every one of them.
	fleetHooks = 15
	// publishEvery paces the load: 8 events/s, 120 deliveries/s.
	publishEvery = 125 * time.Millisecond
	// inFlightLimit is the endpoint grain's default in-flight limit: at
	// most that many attempts of one endpoint can be cut short at once.
	inFlightLimit = 10
)

var lostOwnership = regexp.MustCompile(`endpoint grain lost ownership`)
var memberLeft = regexp.MustCompile(`msg="memberlist node left"`)

// startThree starts three nodes, the second and third joining the first,
// and waits until each sees all three. It returns them with their data
// directories.
func (f *fleet) startThree(t *testing.T) ([]*node, []string) {
	t.Helper()
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	first := f.start(dirs[0])
	nodes := []*node{first, f.start(dirs[1], first.gossip(t)), f.start(dirs[2], first.gossip(t))}
	waitMembers(t, nodes...)
	t.Cleanup(func() { stopAll(t, nodes...) }) // before each node's own cleanup
	waitShared(t, nodes...)
	return nodes, dirs
}

// waitShared waits until the nodes share the delivery partitions: each
// serves some, all it owns caught up, and together they serve every one.
// Members that join warm their partitions up first and take them over
// after: until then the first member serves them, and an endpoint
// attempted before and after such a move is attempted by two nodes.
func waitShared(t *testing.T, nodes ...*node) {
	t.Helper()
	admin := nodes[0].as(t, adminToken)
	console := controlv1.NewOperatorServiceClient(admin.cc)
	waitForLong(t, 60*time.Second, func() (string, bool) {
		st, err := console.GetClusterStatus(admin.ctx(), &controlv1.GetClusterStatusRequest{})
		if err != nil {
			return fmt.Sprintf("cluster status: %v", err), false
		}
		owned := int32(0)
		for _, ns := range st.GetNodes() {
			if ns.GetError() != "" || ns.GetPartitionsOwned() == 0 || ns.GetPartitionsLive() != ns.GetPartitionsOwned() {
				return fmt.Sprintf("member %s: %d partitions served, %d caught up (%s)", ns.GetMemberId(), ns.GetPartitionsOwned(), ns.GetPartitionsLive(), ns.GetError()), false
			}
			owned += ns.GetPartitionsOwned()
		}
		if len(st.GetNodes()) != len(nodes) || owned != st.GetPartitions() || st.GetUnserved() != 0 {
			return fmt.Sprintf("%d members serve %d of %d partitions, %d unserved", len(st.GetNodes()), owned, st.GetPartitions(), st.GetUnserved()), false
		}
		return "", true
	})
}

// warmUp waits until every endpoint has received a few webhooks (its grain
// is placed and delivering) and returns which nodes attempted each
// endpoint so far.
func warmUp(t *testing.T, nodes []*node, hooks []*hook, since time.Time) map[string][]int {
	t.Helper()
	waitForLong(t, 45*time.Second, func() (string, bool) {
		for _, h := range hooks {
			if n := len(h.rcv.got()); n < 5 {
				return fmt.Sprintf("%s received %d", h.id, n), false
			}
		}
		return "", true
	})
	// The attempt lines come through the nodes' stderr pipes: wait until
	// each endpoint shows up in them too.
	return waitForLong(t, 10*time.Second, func() (map[string][]int, bool) {
		p := placement(nodes, since, time.Now().Add(time.Hour))
		return p, len(p) == len(hooks)
	})
}

// busiest returns the index of the node that owns the most endpoints, and
// those endpoints. It fails the test if an endpoint was attempted by more
// than one node: the cluster was not settled.
func busiest(t *testing.T, owners map[string][]int, n int) (int, []string) {
	t.Helper()
	by := make([][]string, n)
	for ep, idx := range owners {
		if len(idx) != 1 {
			t.Fatalf("endpoint %s was attempted by nodes %v while the cluster was stable", ep, idx)
		}
		by[idx[0]] = append(by[idx[0]], ep)
	}
	best := 0
	for i := range by {
		slices.Sort(by[i])
		if len(by[i]) > len(by[best]) {
			best = i
		}
	}
	return best, by[best]
}

func others(nodes []*node, i int) []*node {
	var out []*node
	for j, n := range nodes {
		if j != i {
			out = append(out, n)
		}
	}
	return out
}

// failoverFigures logs, for the endpoints of a stopped node and for the
// others, how long their arrivals paused around t0, and returns the
// longest time from t0 to the resumption of an orphaned endpoint.
func failoverFigures(t *testing.T, what string, hooks []*hook, orphans []string, t0, until time.Time) time.Duration {
	t.Helper()
	var worst, best time.Duration = 0, time.Hour
	var otherGap time.Duration
	var otherEP string
	for _, h := range hooks {
		r := resumeAfter(h.rcv.got(), t0, until)
		if slices.Contains(orphans, h.id) {
			d := r.resumed.Sub(t0)
			if r.resumed.IsZero() {
				t.Errorf("%s: orphaned endpoint %s never resumed after the %s", what, h.id, what)
				continue
			}
			worst, best = max(worst, d), min(best, d)
			t.Logf("%s: orphaned endpoint %s: longest pause %v, resumed %v after the %s", what, h.id, r.gap.Round(time.Millisecond), d.Round(time.Millisecond), what)
			continue
		}
		if r.gap > otherGap {
			otherGap, otherEP = r.gap, h.id
		}
	}
	t.Logf("FIGURE %s: failover time (%s -> first delivery of an orphaned endpoint received again): max %v, min %v over %d orphaned endpoints; longest pause of an endpoint that did not move: %v (%s)",
		what, what, worst.Round(time.Millisecond), best.Round(time.Millisecond), len(orphans), otherGap.Round(time.Millisecond), otherEP)
	return worst
}

// explainDuplicates logs each duplicated delivery with the nodes that
// completed an attempt of it (an attempt cut short leaves no line).
func explainDuplicates(t *testing.T, tl tally, nodes []*node, planned map[string]string) {
	t.Helper()
	by := attemptedBy(nodes)
	ids := make([]string, 0, len(tl.dupes))
	for id := range tl.dupes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if i == 10 {
			t.Logf("... and %d more duplicated deliveries", len(ids)-i)
			break
		}
		t.Logf("duplicate: delivery %s (endpoint %s) received %d times; completed attempts on nodes %v", id, planned[id], tl.dupes[id]+1, by[id])
	}
}

// TestFailoverKill kills one of three nodes with SIGKILL under a steady
// publish load. Its grains come back on the survivors; every delivery ends
// with one success; nothing is lost; the only duplicates are attempts of
// the killed node's endpoints that were in flight at the kill (at most the
// in-flight limit per endpoint), each repeating its webhook-id.
func TestFailoverKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three nodes")
	}
	f := newFleet(t)
	nodes, _ := f.startThree(t)
	t.Cleanup(func() { dumpLogs(t, nodes...) })
	key := newTenant(t, nodes[0])
	hooks := createHooks(t, nodes[0].as(t, key), fleetHooks, "order.paid", nil, 0)

	began := time.Now()
	pub := startPublisher(t, key, "kill", "order.paid", publishEvery, 160, 40*time.Second, nodes...)
	owners := warmUp(t, nodes, hooks, began)
	victim, orphans := busiest(t, owners, len(nodes))
	survivors := others(nodes, victim)
	pub.setTargets(t, survivors...)
	t.Logf("killing node %d (%s), owner of %v", victim, nodes[victim].memberID(t), orphans)

	killed := time.Now()
	nodes[victim].kill(t)
	pub.wait(t)
	planned := pub.plan()
	tl := waitReceived(t, hooks, planned, 90*time.Second)
	settled := time.Now()
	log := f.waitTerminal(t, planned)
	checkSingleWriter(t, planned, log)
	pub.checkLedger(t, hooks)

	// The contract: nothing lost, nothing foreign, every signature valid.
	if len(tl.unplanned) > 0 || tl.badSigs > 0 {
		t.Errorf("receivers got %d unplanned webhook-ids (%v) and %d bad signatures", len(tl.unplanned), first(tl.unplanned, 5), tl.badSigs)
	}
	// Duplicates: only the killed node's endpoints, at most the in-flight
	// limit each.
	for ep, n := range tl.dupesByEP {
		if !slices.Contains(orphans, ep) {
			t.Errorf("endpoint %s, which did not live on the killed node, got %d duplicates", ep, n)
		}
		if n > inFlightLimit {
			t.Errorf("endpoint %s got %d duplicates, more than its in-flight limit %d", ep, n, inFlightLimit)
		}
	}
	explainDuplicates(t, tl, nodes, planned)

	// The orphaned endpoints came back on the survivors.
	after := placement(nodes, killed, time.Now().Add(time.Hour))
	for _, ep := range orphans {
		if len(after[ep]) == 0 || slices.Contains(after[ep], victim) {
			t.Errorf("endpoint %s: attempts after the kill on nodes %v, want a survivor", ep, after[ep])
		}
	}

	detected := time.Duration(-1)
	for _, s := range survivors {
		if at, ok := s.firstLineAfter(memberLeft, killed); ok && (detected < 0 || at.Sub(killed) < detected) {
			detected = at.Sub(killed)
		}
	}
	t.Logf("FIGURE kill: memberlist declared the killed node gone %v after the kill", detected.Round(time.Millisecond))
	failoverFigures(t, "kill", hooks, orphans, killed, settled)
	t.Logf("FIGURE kill: %d events, %d deliveries planned, %d received once or more (lost 0), %d requests, %d duplicates (%v by endpoint, at most %d copies of one delivery), %d publishes retried on another node",
		pub.events, len(planned), tl.unique, tl.requests, tl.duplicates(), tl.dupesByEP, max(tl.maxCopies, 1), pub.retried)
}

// TestFailoverGracefulStopAndRejoin stops one of three nodes with SIGTERM
// under load: its grains are handed over to the survivors with no
// duplicate. Then the node is started again on its data directory, joining
// a survivor: it takes its share of the endpoints back (its own attempt
// lines name endpoints again while the others go on), with nothing lost
// and at most the attempts in flight on the old owners repeated.
//
// What shows the share taken back: every endpoint grain logs a debug line
// per attempt, on the node where it is active. After the rejoin, the
// restarted node logs attempts for some endpoints and, once placement has
// settled, each endpoint is attempted by exactly one node. Rendezvous
// hashing gives each member about a third of the 15 endpoints; a new member
// id gets none with probability (2/3)^15, about 0.2 %.
func TestFailoverGracefulStopAndRejoin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three nodes")
	}
	f := newFleet(t)
	nodes, dirs := f.startThree(t)
	all := slices.Clone(nodes) // every process, the restarted one appended
	t.Cleanup(func() { dumpLogs(t, all...) })
	key := newTenant(t, nodes[0])
	hooks := createHooks(t, nodes[0].as(t, key), fleetHooks, "order.paid", nil, 0)

	began := time.Now()
	pub := startPublisher(t, key, "grace", "order.paid", publishEvery, 200, 60*time.Second, nodes...)
	owners := warmUp(t, nodes, hooks, began)
	victim, orphans := busiest(t, owners, len(nodes))
	survivors := others(nodes, victim)
	pub.setTargets(t, survivors...)
	t.Logf("stopping node %d (%s), owner of %v", victim, nodes[victim].memberID(t), orphans)

	stopping := time.Now()
	nodes[victim].stop(t)
	stopped := time.Now()
	t.Logf("FIGURE graceful: SIGTERM to exit took %v", stopped.Sub(stopping).Round(time.Millisecond))
	// The orphaned endpoints are delivered by the survivors.
	waitForLong(t, 45*time.Second, func() (string, bool) {
		p := placement(survivors, stopped, time.Now().Add(time.Hour))
		for _, ep := range orphans {
			if len(p[ep]) == 0 {
				return ep + " not attempted by a survivor yet", false
			}
		}
		return "", true
	})
	handedOver := time.Now()

	// Rejoin: the same data directory, a new member id.
	restarting := time.Now()
	back := f.start(dirs[victim], survivors[0].gossip(t))
	t.Cleanup(func() { back.stop(t) })
	nodes[victim] = back
	all = append(all, back)
	waitMembers(t, nodes...)
	rejoined := time.Now()
	pub.setTargets(t, nodes...)
	taken := waitForLong(t, 45*time.Second, func() ([]string, bool) {
		var eps []string
		for ep := range placement([]*node{back}, rejoined, time.Now().Add(time.Hour)) {
			eps = append(eps, ep)
		}
		slices.Sort(eps)
		return eps, len(eps) > 0
	})
	t.Logf("the rejoined node %s delivers %v", back.memberID(t), taken)

	pub.wait(t)
	ended := time.Now()
	planned := pub.plan()
	tl := waitReceived(t, hooks, planned, 90*time.Second)
	settled := time.Now()
	log := f.waitTerminal(t, planned)
	checkSingleWriter(t, planned, log)
	pub.checkLedger(t, hooks)
	if len(tl.unplanned) > 0 || tl.badSigs > 0 {
		t.Errorf("receivers got %d unplanned webhook-ids (%v) and %d bad signatures", len(tl.unplanned), first(tl.unplanned, 5), tl.badSigs)
	}

	// Once placement settled after the rejoin (the last seconds of the
	// load), each endpoint is attempted by exactly one node, and the
	// rejoined node by some.
	late := placement(nodes, ended.Add(-4*time.Second), settled)
	mine := 0
	for _, h := range hooks {
		switch idx := late[h.id]; {
		case len(idx) > 1:
			t.Errorf("endpoint %s was attempted by nodes %v at the end of the load: two owners", h.id, idx)
		case len(idx) == 1 && idx[0] == victim:
			mine++
		}
	}
	if mine == 0 {
		t.Errorf("the rejoined node attempted no endpoint at the end of the load: it did not take its share back")
	}

	failoverFigures(t, "graceful stop", hooks, orphans, stopping, handedOver)
	t.Logf("FIGURE rejoin: the rejoined node took %d of %d endpoints (first attempt of one %v after the rejoin); it owned %d before its stop",
		mine, len(hooks), firstAttempt(back, rejoined).Sub(rejoined).Round(time.Millisecond), len(orphans))
	explainDuplicates(t, tl, all, planned)
	// Each extra copy belongs to the hand-over during which it arrived.
	atStop, atRejoin := dupesAround(hooks, restarting)
	t.Logf("FIGURE graceful: %d events, %d deliveries, %d requests, %d duplicates (%v by endpoint): %d across the graceful stop, %d across the rejoin",
		pub.events, len(planned), tl.requests, tl.duplicates(), tl.dupesByEP, atStop, atRejoin)
	// A graceful stop hands over with no duplicate.
	if atStop > 0 {
		t.Errorf("%d duplicates across the graceful stop, want none", atStop)
	}
	// The hand-back at a rejoin stops the moved grains on their old owners
	// while they have attempts in flight: those are repeated, at most the
	// in-flight limit per moved endpoint. KNOWN ISSUE: it should be none, as
	// for a graceful stop; see the failover report.
	// Placement may move an endpoint more than once while the member list
	// settles: bound each endpoint's repeats by the in-flight limit for
	// each of the two hand-overs it can see here (the stop, the rejoin).
	for ep, d := range tl.dupesByEP {
		if d > 2*inFlightLimit {
			t.Errorf("endpoint %s: %d duplicates, more than the in-flight limit %d for each of its hand-overs", ep, d, inFlightLimit)
		}
	}
	if atRejoin > 0 {
		t.Logf("KNOWN ISSUE: the hand-back at the rejoin repeated %d attempts cut short on the old owners (want none, as for a graceful stop)", atRejoin)
	}
}

func firstAttempt(n *node, from time.Time) time.Time {
	for _, a := range n.attempts() {
		if !a.at.Before(from) {
			return a.at
		}
	}
	return time.Time{}
}

// TestFailoverSplitBrain runs two nodes on the same log that do not join
// each other (two clusters of one, a split brain): each sees the other as
// dead. The partition table in the log settles it: B takes the endpoint's
// partition over from A once (FAILOVER), and A, which reads the table, stops
// serving it and does not take it back while it was taken from it lately.
// Fencing by expected revision keeps the log single-writer throughout:
// every delivery ends with exactly one success and no two outcomes of one
// attempt number; duplicates at the receiver come only from what A had in
// flight when B took over, bounded by the in-flight limit. Then the split
// is healed (one node restarts joining the other) and the endpoint has
// exactly one owner: one node attempts, one activation writes, no
// duplicate.
func TestFailoverSplitBrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two nodes")
	}
	const limit = 4 // the endpoint's in-flight limit
	f := newFleet(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a := f.start(dirA)
	b := f.start(dirB) // no --join: a second cluster on the same log
	var b2 *node
	t.Cleanup(func() { dumpLogs(t, a, b, b2) })
	waitMembers(t, a)
	waitMembers(t, b)
	key := newTenant(t, a)
	// A receiver that takes 100 ms per webhook keeps both activations'
	// attempts in flight together.
	hooks := createHooks(t, a.as(t, key), 1, "order.paid",
		&controlv1.EndpointSettings{RatePerSecond: 1000, Burst: 100, MaxInFlight: limit}, 100*time.Millisecond)
	ep := hooks[0].id
	// The endpoint's grain is active in both clusters: each answers.
	for _, n := range []*node{a, b} {
		api := n.as(t, key)
		waitFor(t, func() (error, bool) {
			_, err := api.endpoints().GetEndpoint(api.ctx(), &controlv1.GetEndpointRequest{EndpointId: ep})
			return err, err == nil
		})
	}

	split := time.Now()
	pub := startPublisher(t, key, "split", "order.paid", 25*time.Millisecond, 60, 20*time.Second, a, b)
	pub.wait(t)
	planned := pub.plan()
	tl := waitReceived(t, hooks, planned, 90*time.Second)
	log := f.waitTerminal(t, planned)
	writers := checkSingleWriter(t, planned, log)
	pub.checkLedger(t, hooks)
	stops := a.count(lostOwnership) + b.count(lostOwnership)
	onA := len(placement([]*node{a}, split, time.Now().Add(time.Hour)))
	onB := len(placement([]*node{b}, split, time.Now().Add(time.Hour)))
	t.Logf("FIGURE split brain: %d deliveries, %d requests, %d duplicates (%d requests cut short by a stopping activation, at most %d copies of one delivery); outcomes written by %d activations; %d stops on a wrong revision; attempts on node A: %v, on node B: %v",
		len(planned), tl.requests, tl.duplicates(), tl.cut, tl.maxCopies, len(writers[ep]), stops, onA > 0, onB > 0)
	explainDuplicates(t, tl, []*node{a, b}, planned)
	if onA == 0 && onB == 0 {
		t.Errorf("neither side attempted")
	}
	// The duplicates of the split are the attempts A started before it
	// learned that B took the partition: those in flight then, and those
	// finished whose outcomes it had not recorded (each bounded by the
	// in-flight limit), and as many again for each activation that lost a
	// race on a delivery stream and stopped on a wrong revision.
	if d := tl.duplicates(); d > (stops+1)*2*limit {
		t.Errorf("%d duplicates for %d deliveries, more than twice the in-flight limit %d for the take-over and for each stop on a wrong revision (%d stops)",
			d, len(planned), limit, stops)
	}
	if len(tl.unplanned) > 0 || tl.badSigs > 0 {
		t.Errorf("receiver got %d unplanned webhook-ids and %d bad signatures", len(tl.unplanned), tl.badSigs)
	}

	// Heal: B leaves its cluster of one and joins A's.
	b.stop(t)
	b2 = f.start(dirB, a.gossip(t))
	t.Cleanup(func() { stopAll(t, a, b2) })
	waitMembers(t, a, b2)
	// B warms the partitions it is the target of up, then A hands them
	// back: a planned move, which the load must not straddle to show one
	// owner.
	waitShared(t, a, b2)
	stopsBefore := a.count(lostOwnership) + b2.count(lostOwnership)
	pub2 := startPublisher(t, key, "healed", "order.paid", 25*time.Millisecond, 40, 20*time.Second, a, b2)
	pub2.wait(t)
	planned2 := pub2.plan()
	tl2 := waitReceived(t, hooks, planned2, 60*time.Second)
	log2 := f.waitTerminal(t, planned2)
	writers2 := checkSingleWriter(t, planned2, log2)
	pub2.checkLedger(t, hooks)

	dupes2 := 0
	for id := range planned2 {
		dupes2 += tl2.dupes[id]
	}
	by := attemptedBy([]*node{a, b2})
	owners := map[int]int{}
	for id := range planned2 {
		for _, i := range by[id] {
			owners[i]++
		}
	}
	newStops := a.count(lostOwnership) + b2.count(lostOwnership) - stopsBefore
	t.Logf("FIGURE healed: %d deliveries, %d duplicates, %d activations wrote outcomes, attempts by node index %v, %d new stops on a wrong revision",
		len(planned2), dupes2, len(writers2[ep]), owners, newStops)
	if len(owners) != 1 || len(writers2[ep]) != 1 {
		t.Errorf("after healing, endpoint %s has attempts on nodes %v and outcomes from %d activations: want exactly one owner", ep, owners, len(writers2[ep]))
	}
	if dupes2 != 0 || newStops != 0 {
		t.Errorf("after healing: %d duplicates and %d stops on a wrong revision, want none", dupes2, newStops)
	}
}
