//go:build !race

// Two nodes in one process race inside protoactor-go; .ci/run runs this
// file without -race (see server_test.go).

package node_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestHandOver stops one of two nodes gracefully under the eyes of a
// reader: the stopping node hands its partitions to the other, drained,
// and side effects move once.
//
// With a standby (the default), the other node applies the stopping
// node's partitions all along: every GET of an existing delivery through
// it answers, before, during and after the move; the outcome counters it
// exports do not count the moved partitions' past outcomes again (the sum
// over the nodes stays the number of attempts); it does not publish again
// the operational event the stopping node emitted; and no attempt is
// repeated. Without a standby, the other node catches the partitions up
// after the move: meanwhile a GET answers UNAVAILABLE, never NOT_FOUND.
func TestHandOver(t *testing.T) {
	t.Run("with a standby", func(t *testing.T) { testHandOver(t, 0) })
	t.Run("without a standby", func(t *testing.T) { testHandOver(t, -1) })
}

func testHandOver(t *testing.T, standbys int) {
	_, a, b := startPair(t, func(c *node.Config) { c.Standbys = standbys })
	recv := newCountingReceiver(t)
	key := tenantWithKey(t, a)
	kctx, kcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer kcancel()
	kctx = metadata.AppendToOutgoingContext(kctx, "authorization", "Bearer "+key)
	api := controlv1.NewEndpointServiceClient(a.cc)

	// Endpoints on both nodes' partitions, and one for operational events.
	var onA, onB []string
	for i := 0; len(onA) < 3 || len(onB) < 3; i++ {
		r, err := api.CreateEndpoint(kctx, &controlv1.CreateEndpointRequest{
			EndpointId: fmt.Sprintf("ep_%02d", i), Settings: &controlv1.EndpointSettings{Url: recv.URL + "/in", EventTypes: []string{"order.paid"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		id := r.GetEndpoint().GetEndpointId()
		if b.srv.Serving().Has(events.PartitionOf(id)) {
			onB = append(onB, id)
		} else {
			onA = append(onA, id)
		}
	}
	if _, err := api.CreateEndpoint(kctx, &controlv1.CreateEndpointRequest{
		EndpointId: "ops", Settings: &controlv1.EndpointSettings{Url: recv.URL + "/ops", EventTypes: []string{"hookline.*"}},
	}); err != nil {
		t.Fatal(err)
	}
	// Deliveries to every endpoint, all succeeded: enough history that a
	// node without a standby takes a while to catch b's partitions up.
	var deliveries, ofB []string
	for i := range 8 {
		batch := &controlv1.PublishBatchRequest{}
		for j := range 50 {
			batch.Events = append(batch.Events, &controlv1.PublishRequest{
				EventId: fmt.Sprintf("ord_%d_%d", i, j), Type: "order.paid", Payload: []byte(`{"n":` + strconv.Itoa(i*50+j) + `}`),
			})
		}
		r, err := controlv1.NewEventServiceClient(a.cc).PublishBatch(kctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range r.GetResults() {
			for _, d := range res.GetResponse().GetDeliveries() {
				deliveries = append(deliveries, d.GetDeliveryId())
				if b.srv.Serving().Has(events.PartitionOf(d.GetEndpointId())) && len(ofB) < 100 {
					ofB = append(ofB, d.GetDeliveryId())
				}
			}
		}
	}
	poll(t, 60*time.Second, "every delivery received", func() bool { return recv.distinct("/in") == len(deliveries) })
	// An operational event caused on b's partition: b emits it.
	if _, err := api.PauseEndpoint(kctx, &controlv1.PauseEndpointRequest{EndpointId: onB[0]}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the operational event received", func() bool { return recv.distinct("/ops") == 1 })
	// One attempt each: the deliveries and the operational event.
	poll(t, 10*time.Second, "every outcome counted once", func() bool {
		return metric(t, a, "hookline_attempts_total")+metric(t, b, "hookline_attempts_total") == float64(len(deliveries)+1)
	})
	attemptsOnA, emittedByA := metric(t, a, "hookline_attempts_total"), metric(t, a, `hookline_operational_events_total{result="emitted"}`)

	// A reader polls deliveries of b's partitions through a while b stops.
	stop := make(chan struct{})
	var notFound, unavailable, reads atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		dapi := controlv1.NewDeliveryServiceClient(a.cc)
		tick := time.NewTicker(50 * time.Millisecond) // a round of reads at most every 50 ms
		defer tick.Stop()
		for range tick.C {
			for _, id := range ofB {
				select {
				case <-stop:
					return
				default:
				}
				_, err := dapi.GetDelivery(kctx, &controlv1.GetDeliveryRequest{DeliveryId: id})
				reads.Add(1)
				switch status.Code(err) {
				case codes.NotFound:
					notFound.Add(1)
				case codes.Unavailable:
					unavailable.Add(1)
				}
			}
		}
	})
	b.stop(t)
	poll(t, 60*time.Second, "a serves every partition", func() bool { return a.srv.Serving().Len() == events.Partitions })
	before := reads.Load()
	poll(t, 10*time.Second, "the reader read them all again", func() bool { return reads.Load() >= before+int64(len(ofB)) })
	close(stop)
	wg.Wait()

	t.Logf("FIGURE hand-over (standbys %d): %d reads during the move, %d NOT_FOUND, %d UNAVAILABLE", standbys, reads.Load(), notFound.Load(), unavailable.Load())
	if n := notFound.Load(); n > 0 {
		t.Errorf("%d reads of existing deliveries answered NOT_FOUND during the move; want UNAVAILABLE at worst", n)
	}
	if standbys == 0 && unavailable.Load() > 0 {
		t.Errorf("%d reads answered UNAVAILABLE: with a standby, the other node answers all along", unavailable.Load())
	}
	if got := metric(t, a, "hookline_attempts_total"); got != attemptsOnA {
		t.Errorf("a counts %v attempts after the move, %v before: it counted the moved partitions' outcomes again", got, attemptsOnA)
	}
	if got := metric(t, a, `hookline_operational_events_total{result="emitted"}`); got != emittedByA {
		t.Errorf("a emitted %v operational events after the move, %v before: it published b's again", got, emittedByA)
	}
	if d := recv.duplicates(); d > 0 {
		t.Errorf("%d deliveries received more than once: a drained hand-over repeats none", d)
	}
}

// startPair starts two nodes on one embedded log, with edit applied to
// their configs (nil: none), and waits until they share the partitions.
func startPair(t *testing.T, edit func(*node.Config)) (*embedded.Log, *testServer, *testServer) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir)
	a := startServerWith(t, l, filepath.Join(dir, "a"), edit)
	b := startServerWith(t, l, filepath.Join(dir, "b"), edit, a.srv.Node().GossipAddress())
	poll(t, 20*time.Second, "both nodes serve their share", func() bool {
		sa, sb := a.srv.Serving(), b.srv.Serving()
		return sa.Len() > 0 && sb.Len() > 0 && sa.Union(sb).Len() == events.Partitions
	})
	return l, a, b
}

// tenantWithKey creates tenant acme through ts and returns an API key.
func tenantWithKey(t *testing.T, ts *testServer) string {
	t.Helper()
	ctx, cancel := bearer(admin)
	defer cancel()
	tenants := controlv1.NewTenantServiceClient(ts.cc)
	// A quota well above what the tests send: at the default 100 attempts
	// a second, delivering a hand-over test's 3,200 to 4,000 deliveries
	// took 32 to 40 s of its 60 s, and a slow moment made it miss.
	if _, err := tenants.CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme",
		Quota: &hooklinev1.Quota{AttemptsPerSecond: 5000, MaxInFlight: 1000}}); err != nil {
		t.Fatal(err)
	}
	k, err := tenants.IssueApiKey(ctx, &controlv1.IssueApiKeyRequest{TenantId: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	return k.GetApiKey()
}

// metric reads one series of ts's /metrics: the sum of the lines whose
// name (with labels, when given) starts with name.
func metric(t *testing.T, ts *testServer, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + ts.srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue // another metric with this prefix
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// countingReceiver answers 200 and counts each webhook-id by path.
type countingReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]map[string]int // path → webhook-id → count
}

func newCountingReceiver(t *testing.T) *countingReceiver {
	r := &countingReceiver{seen: map[string]map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		if r.seen[req.URL.Path] == nil {
			r.seen[req.URL.Path] = map[string]int{}
		}
		r.seen[req.URL.Path][req.Header.Get("webhook-id")]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *countingReceiver) distinct(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen[path])
}

func (r *countingReceiver) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := 0
	for _, ids := range r.seen {
		for _, n := range ids {
			d += n - 1
		}
	}
	return d
}

// TestStoppingTogether stops both nodes of a cluster at once, as a
// shutdown of the whole cluster does: each says it is leaving, so neither
// hands its partitions to the other, which is leaving too. Before the
// members said so, the two handed the partitions back and forth, each
// partition many times, until the stop's bound ran out.
func TestStoppingTogether(t *testing.T) {
	l, a, b := startPair(t, nil)
	before := handOvers(t, l)

	var wg sync.WaitGroup
	for _, ts := range []*testServer{a, b} {
		wg.Go(func() { ts.stop(t) })
	}
	wg.Wait()

	moved := map[uint32]int{}
	for _, ev := range handOvers(t, l)[len(before):] {
		for _, p := range ev.GetPartitions() {
			moved[p]++
		}
	}
	most := 0
	for _, n := range moved {
		most = max(most, n)
	}
	// A partition moves once when one node hands it over before the
	// other's notice arrives; once more at most when the notice and the
	// hand-over's record cross (the notice goes member to member, the
	// record through the log). Never back and forth.
	for p, n := range moved {
		if n > 2 {
			t.Errorf("partition %d handed over %d times while both nodes stopped; want at most twice", p, n)
		}
	}
	t.Logf("%d partitions handed over while both nodes stopped, each at most %d times", len(moved), most)
}

// handOvers returns the hand-overs in the partition table, in order.
func handOvers(t *testing.T, l events.Log) []*hooklinev1.PartitionsAssigned {
	t.Helper()
	recs, err := l.ReadStream(t.Context(), events.OwnersStream, events.Forwards, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []*hooklinev1.PartitionsAssigned
	for i := range recs {
		msg, err := events.Decode(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if pa, ok := msg.(*hooklinev1.PartitionsAssigned); ok && pa.GetReason() == hooklinev1.PartitionsAssigned_REASON_HANDOVER {
			out = append(out, pa)
		}
	}
	return out
}

// TestHandOverWhileAnAttemptRuns stops a node while one of its endpoints'
// receivers holds an attempt open. The hand-over does not wait for that
// attempt: it is recorded at once, listing the attempt, and the other
// node serves the partition from there: a delivery published meanwhile to
// another endpoint of the same partition arrives while the held attempt is
// still open. The other node does not attempt the held delivery itself,
// and counts it against its endpoint's in-flight limit (1): a second
// delivery to that endpoint waits. The stopping node records the held
// attempt's outcome once the receiver answers; the delivery ends succeeded
// after one attempt, received once, and the other node, woken by that
// outcome, attempts the second delivery at once.
func TestHandOverWhileAnAttemptRuns(t *testing.T) {
	l, a, b := startPair(t, nil)
	recv := newCountingReceiver(t)
	hold := &holding{held: make(chan struct{}, 1), release: make(chan struct{}), next: recv.Config.Handler}
	recv.Config.Handler = hold // before any request
	defer hold.open()

	key := tenantWithKey(t, a)
	kctx, kcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer kcancel()
	kctx = metadata.AppendToOutgoingContext(kctx, "authorization", "Bearer "+key)
	api := controlv1.NewEndpointServiceClient(a.cc)
	// Two endpoints of one partition that b serves: one whose receiver
	// holds its attempt, one that answers at once.
	var slow, fast int
	ids, byPart := map[int]string{}, map[events.Partition]int{}
	for i := 0; fast == 0; i++ {
		if i == 200 {
			t.Fatal("no two of 200 endpoints share a partition of b")
		}
		r, err := api.CreateEndpoint(kctx, &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
			Url: fmt.Sprintf("%s/e%d", recv.URL, i), EventTypes: []string{fmt.Sprintf("order.e%d", i)}, TimeoutMs: 25000, MaxInFlight: 1,
		}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.GetEndpoint().GetEndpointId()
		p := events.PartitionOf(ids[i])
		if first, ok := byPart[p]; ok && b.srv.Serving().Has(p) {
			slow, fast = first, i
		}
		byPart[p] = i
	}
	part := events.PartitionOf(ids[slow])
	hold.path.Store(fmt.Sprintf("/e%d", slow))
	evs := controlv1.NewEventServiceClient(a.cc)
	pub, err := evs.Publish(kctx, &controlv1.PublishRequest{EventId: "held_1", Type: fmt.Sprintf("order.e%d", slow), Payload: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	heldID := pub.GetDeliveries()[0].GetDeliveryId()
	select {
	case <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the held endpoint's receiver got no attempt within 30 s")
	}

	stopped := make(chan struct{})
	go func() { defer close(stopped); b.stop(t) }()
	poll(t, 10*time.Second, "a serves the partition while b's attempt is held", func() bool { return a.srv.Serving().Has(part) })
	if _, err := evs.Publish(kctx, &controlv1.PublishRequest{EventId: "paid_1", Type: fmt.Sprintf("order.e%d", fast), Payload: []byte(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	fastPath, slowPath := fmt.Sprintf("/e%d", fast), fmt.Sprintf("/e%d", slow)
	poll(t, 10*time.Second, "the other endpoint's delivery received while the attempt is held", func() bool { return recv.distinct(fastPath) == 1 })
	if _, err := evs.Publish(kctx, &controlv1.PublishRequest{EventId: "held_2", Type: fmt.Sprintf("order.e%d", slow), Payload: []byte(`{"n":3}`)}); err != nil {
		t.Fatal(err)
	}
	// The fast endpoint's next delivery is a witness: a has planned and
	// attempted what came after the held endpoint's second one.
	if _, err := evs.Publish(kctx, &controlv1.PublishRequest{EventId: "paid_2", Type: fmt.Sprintf("order.e%d", fast), Payload: []byte(`{"n":4}`)}); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the other endpoint's second delivery received", func() bool { return recv.distinct(fastPath) == 2 })
	if n := recv.distinct(slowPath); n != 0 {
		t.Errorf("the held endpoint's receiver answered %d requests while the first was held; want none: its in-flight limit of 1 counts the attempt b still runs", n)
	}

	var listed bool
	for _, h := range handOvers(t, l) {
		for _, r := range h.GetRunning() {
			listed = listed || (r.GetDeliveryId() == heldID && r.GetEndpointId() == ids[slow] && r.GetAttempt() == 1)
		}
	}
	if !listed {
		t.Errorf("no hand-over lists the held attempt of %s as running", heldID)
	}

	hold.open()
	dapi := controlv1.NewDeliveryServiceClient(a.cc)
	poll(t, 30*time.Second, "the held delivery ends succeeded", func() bool {
		d, err := dapi.GetDelivery(kctx, &controlv1.GetDeliveryRequest{DeliveryId: heldID})
		return err == nil && d.GetStatus() == "succeeded"
	})
	d, err := dapi.GetDelivery(kctx, &controlv1.GetDeliveryRequest{DeliveryId: heldID})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetAttemptCount() != 1 {
		t.Errorf("the held delivery ended after %d attempts; want the one b ran", d.GetAttemptCount())
	}
	poll(t, 10*time.Second, "the held endpoint's second delivery received", func() bool { return recv.distinct(slowPath) == 2 })
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("b did not stop within 30 s of the held attempt's answer")
	}
	if n := recv.duplicates(); n > 0 {
		t.Errorf("%d deliveries received more than once: a hand-over repeats no attempt", n)
	}
}

// holding holds the requests to one path (none until it is set) until
// open, and tells of the first on held; next answers every request.
type holding struct {
	path     atomic.Value // string
	held     chan struct{}
	release  chan struct{}
	openOnce sync.Once
	next     http.Handler
}

func (h *holding) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p, _ := h.path.Load().(string); p != "" && r.URL.Path == p {
		select {
		case h.held <- struct{}{}:
		default:
		}
		<-h.release
	}
	h.next.ServeHTTP(w, r)
}

func (h *holding) open() { h.openOnce.Do(func() { close(h.release) }) }
