package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc/metadata"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// A SIGKILL leaves the page cache to the kernel, so a missing fsync never
// shows in a kill test. TestPowerLoss runs the embedded log and the
// projections on Pebble's crashable in-memory file system, whose
// CrashClone keeps exactly what was synced: a power cut. The log the node
// is given records which of its appends were acknowledged, and when.

// powerCuts is how many times TestPowerLoss cuts the power;
// HOOKLINE_POWER_CUTS sets another count, for hunting a rare loss.
func powerCuts(t *testing.T) int {
	v := os.Getenv("HOOKLINE_POWER_CUTS")
	if v == "" {
		return 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("HOOKLINE_POWER_CUTS=%q: give a count of cuts, 1 or more", v)
	}
	return n
}

// ackLog is the node's log, recording the appends it acknowledged: the
// highest revision of each stream, and the deliveries whose success was
// recorded, with the time each acknowledgement came back.
type ackLog struct {
	events.Log

	mu        sync.Mutex // guards the fields below
	revisions map[string]acked
	succeeded map[string]time.Time // delivery id → AttemptSucceeded acknowledged
}

// acked is a stream's highest acknowledged revision and when.
type acked struct {
	rev events.Revision
	at  time.Time
}

func (l *ackLog) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	res, err := l.Log.Append(ctx, stream, expected, evs...)
	if err != nil {
		return res, err
	}
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.revisions[stream]; !ok || res.Revision > a.rev {
		l.revisions[stream] = acked{rev: res.Revision, at: at}
	}
	for _, e := range evs {
		if e.Type == "AttemptSucceeded" && events.Category(stream) == events.DeliveryCategory {
			l.succeeded[strings.TrimPrefix(stream, events.DeliveryCategory+"-")] = at
		}
	}
	return res, nil
}

// before returns the acknowledgements that came back before cut.
func (l *ackLog) before(cut time.Time) (map[string]events.Revision, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	revs := map[string]events.Revision{}
	for s, a := range l.revisions {
		if a.at.Before(cut) {
			revs[s] = a.rev
		}
	}
	var ok []string
	for id, at := range l.succeeded {
		if at.Before(cut) {
			ok = append(ok, id)
		}
	}
	return revs, ok
}

// powerLoad publishes events of one type to a tenant, one at a time, and
// records each publish acknowledged (its answer's deliveries) and when.
type powerLoad struct {
	mu       sync.Mutex           // guards the fields below
	acks     map[string]time.Time // event id → when its publish was answered
	planned  map[string][]string  // event id → delivery ids
	next     int
	refused  []string // publishes refused while the node was up
	round    int
	rounds   map[string]int           // event id → the round whose node answered its publish
	answered map[string]time.Duration // event id → when answered, after its round's cut
}

// powerPace paces each publisher of the load: with two of them, about 100
// events (300 deliveries) a second, which a node under the race detector
// delivers as they come.
const powerPace = 20 * time.Millisecond

// run publishes through c until ctx ends, one event every powerPace.
func (p *powerLoad) run(ctx context.Context, c *tenantClient) {
	tick := time.NewTicker(powerPace)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		id := fmt.Sprintf("pw_%05d", p.next)
		p.next++
		p.mu.Unlock()
		res, err := c.events.Publish(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.key),
			&controlv1.PublishRequest{EventId: id, Type: "order.paid", Payload: fmt.Appendf(nil, `{"event":%q}`, id)})
		if err != nil {
			// Going down, the node's answers are unknown; up, it must
			// take every publish.
			if ctx.Err() == nil {
				p.mu.Lock()
				p.refused = append(p.refused, fmt.Sprintf("%s: %v", id, err))
				p.mu.Unlock()
			}
			continue
		}
		at := time.Now()
		var ids []string
		for _, d := range res.GetDeliveries() {
			ids = append(ids, d.GetDeliveryId())
		}
		p.mu.Lock()
		p.acks[id], p.planned[id], p.rounds[id] = at, ids, p.round
		p.mu.Unlock()
	}
}

// TestPowerLoss cuts the power of a node under load 20 times, at random
// points: each cut keeps only what the embedded log and the projections
// had synced. After each cut the node starts again on what is left, and
// every append it had acknowledged before the cut is there (every publish
// and every recorded outcome, among them); a delivery whose success was
// recorded before the cut is not attempted again; every acknowledged
// publish planned one delivery per endpoint; and at the end the node has
// delivered everything those publishes planned, and says so.
func TestPowerLoss(t *testing.T) {
	mem := vfs.NewCrashableMem()
	dataDir := filepath.Join(t.TempDir(), "node")
	rc := newHookReceiver(t, nil)
	const endpoints = 3
	load := &powerLoad{acks: map[string]time.Time{}, planned: map[string][]string{}, rounds: map[string]int{}, answered: map[string]time.Duration{}}
	cuts := powerCuts(t)
	var heads []events.Position             // the log's head as each round's node started
	durable := map[string]events.Revision{} // every append acknowledged before some cut
	var key, tenantID string
	required := map[string]bool{} // events whose publish is durable: acknowledged before a cut, or in the last run
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 21))
	for round := 0; round <= cuts; round++ {
		l, err := embedded.Open(embedded.Config{Dir: "log", FS: mem})
		if err != nil {
			t.Fatalf("round %d: open the log after the cut: %v", round, err)
		}
		acks := &ackLog{Log: l, revisions: map[string]acked{}, succeeded: map[string]time.Time{}}
		head, err := l.Head(context.Background())
		if err != nil {
			t.Fatalf("round %d: the log's head: %v", round, err)
		}
		heads = append(heads, head)
		load.mu.Lock()
		load.round = round
		load.mu.Unlock()
		began := time.Now()
		n, stop := runE2E(t, node.Config{DataDir: dataDir, Log: acks, ProjectionsFS: mem})
		started := time.Now()
		var c *tenantClient
		if round == 0 {
			c = n.tenant(t, "acme", nil)
			for i := range endpoints {
				c.endpoint(t, rc, fmt.Sprintf("ep_%d", i), []string{"order.paid"}, nil, answer(200))
			}
			key, tenantID = c.key, c.id
		} else {
			c = n.client(t, tenantID, key)
		}
		// The load resumes once the registry has applied again what the
		// log holds beyond its last flush: the tenant's key authenticates
		// and its endpoints are listed. (A node serves before that; what
		// it then answers is the crash scenario's to judge.)
		eventually(t, 30*time.Second, "the registry rebuilt from the log", func() bool {
			l, err := c.endpoints.ListEndpoints(c.ctx(), &controlv1.ListEndpointsRequest{})
			return err == nil && len(l.GetEndpoints()) == endpoints
		})
		loaded := time.Now()

		ctx, endLoad := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { load.run(ctx, c) })
		}
		if round == cuts {
			// The last run: no cut. Everything this node acknowledged is
			// durable; a publish that an earlier node answered after its
			// cut was taken back with the power, rightly.
			endLoad()
			wg.Wait()
			for id, round := range load.rounds {
				if round == cuts {
					required[id] = true
				}
			}
			checkDelivered(t, rc, c, load, required, endpoints, func(id string) string { return whereIs(l, tenantID, load, heads, id) })
			stop()
			l.Close()
			return
		}
		time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond) // a random point of the load
		cut := time.Now()
		clone := mem.CrashClone(vfs.CrashCloneCfg{})
		endLoad()
		wg.Wait()
		if len(load.refused) > 0 {
			t.Fatalf("round %d: the node refused %d publishes while up, e.g. %v", round, len(load.refused), load.refused[0])
		}
		stop()
		if err := l.Close(); err != nil {
			t.Fatalf("round %d: close the log: %v", round, err)
		}
		revs, succeeded := acks.before(cut)
		load.mu.Lock()
		for id, at := range load.acks {
			if load.rounds[id] != round {
				continue
			}
			load.answered[id] = at.Sub(cut)
			if at.Before(cut) {
				required[id] = true
			}
		}
		load.mu.Unlock()
		t.Logf("round %d: started in %v, caught up in %v, cut after %v of load, stopped in %v: %d streams appended to and %d successes acknowledged before the cut", round,
			started.Sub(began).Round(time.Millisecond), loaded.Sub(started).Round(time.Millisecond), cut.Sub(loaded).Round(time.Millisecond),
			time.Since(cut).Round(time.Millisecond), len(revs), len(succeeded))
		for s, r := range revs {
			if r >= durable[s] {
				durable[s] = r
			}
		}
		checkDurable(t, clone, durable)
		mem = clone
		// The next run must not attempt again what was recorded delivered:
		// note the time from which the receiver hears the new run only.
		after := time.Now()
		t.Cleanup(func() {
			for _, id := range succeeded {
				for _, r := range rc.receipts(id) {
					if r.at.After(after) {
						t.Errorf("delivery %s, whose success was recorded before cut %d, was attempted again at %v", id, round, r.at)
						break
					}
				}
			}
		})
	}
}

// checkDurable opens the log left by a cut and checks that every stream
// holds at least the revision acknowledged before the cut.
func checkDurable(t *testing.T, fs vfs.FS, revs map[string]events.Revision) {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: fs})
	if err != nil {
		t.Fatalf("open the log after the cut: %v", err)
	}
	defer l.Close()
	lost := 0
	for stream, rev := range revs {
		recs, err := l.ReadStream(context.Background(), stream, events.Backwards, events.End, 1)
		if err != nil || len(recs) == 0 || recs[0].Revision < rev {
			if lost++; lost <= 5 {
				t.Errorf("stream %s: revision %d was acknowledged before the cut and is gone (read %d records, %v)", stream, rev, len(recs), err)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d streams lost acknowledged appends", lost, len(revs))
	}
}

// checkDelivered waits until every delivery the required publishes planned
// was received, checks that each of them planned one delivery per
// endpoint, and that the node says none is pending or failed.
func checkDelivered(t *testing.T, rc *hookReceiver, c *tenantClient, load *powerLoad, required map[string]bool, endpoints int, where func(deliveryID string) string) {
	t.Helper()
	load.mu.Lock()
	var ids []string
	short := 0
	for ev := range required {
		if len(load.planned[ev]) != endpoints {
			if short++; short <= 5 {
				t.Errorf("publish of %s planned %d deliveries, want one per endpoint (%d)", ev, len(load.planned[ev]), endpoints)
			}
		}
		ids = append(ids, load.planned[ev]...)
	}
	load.mu.Unlock()
	var missing []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		missing = missing[:0]
		for _, id := range ids {
			if rc.count(id) == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, id := range missing[:min(3, len(missing))] {
				d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: id})
				t.Errorf("delivery %s never received: the node says %s, %d attempts, next at %v (%v); %s", id, d.GetStatus(), d.GetAttemptCount(), d.GetNextAttemptAt().AsTime(), err, where(id))
			}
			t.Fatalf("%d of %d deliveries of durable publishes not received within 60 s", len(missing), len(ids))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	eventually(t, 30*time.Second, "nothing pending in the node's history", func() bool { return len(c.list(t, "pending")) == 0 })
	if failed := c.list(t, "failed"); len(failed) > 0 {
		t.Errorf("%d deliveries failed", len(failed))
	}
	if bad := rc.rejected(); len(bad) > 0 {
		t.Errorf("%d requests failed verification: %v", len(bad), bad[:min(3, len(bad))])
	}
	t.Logf("%d durable publishes, %d deliveries, all received", len(required), len(ids))
}

// client is a tenantClient of an existing tenant, on n's connection.
func (n *e2eNode) client(t *testing.T, tenantID, key string) *tenantClient {
	return &tenantClient{
		t: t, id: tenantID, key: key,
		events: controlv1.NewEventServiceClient(n.cc), endpoints: controlv1.NewEndpointServiceClient(n.cc),
		deliveries: controlv1.NewDeliveryServiceClient(n.cc), planned: map[string]string{},
		ids: map[string]string{}, names: map[string]string{},
	}
}

// whereIs says where a delivery's event is: the round whose node answered
// its publish, and its records' positions in the log against the log's
// head as each round started.
func whereIs(l events.Log, tenantID string, load *powerLoad, heads []events.Position, deliveryID string) string {
	load.mu.Lock()
	event, round, answered := "", -1, time.Duration(0)
	for ev, ids := range load.planned {
		if slices.Contains(ids, deliveryID) {
			event, round, answered = ev, load.rounds[ev], load.answered[ev]
		}
	}
	load.mu.Unlock()
	if event == "" {
		return "no publish planned it"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "event %s, answered %v after the cut in round %d (rounds start at the log's heads %v); its records:", event, answered, round, heads)
	recs, err := l.ReadAll(context.Background(), events.Start, 1<<20)
	if err != nil {
		return fmt.Sprintf("%s read the log: %v", b.String(), err)
	}
	for _, r := range recs {
		if r.Stream == events.EventStream(tenantID, event) {
			fmt.Fprintf(&b, " %s@%v (partition %d)", r.Type, r.Position, r.Partition)
		}
	}
	return b.String()
}
