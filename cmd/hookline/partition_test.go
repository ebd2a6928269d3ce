package main_test

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Delivery partitions across real nodes (issue: scale out). Each node
// applies the delivery records of its own partitions, hosts the endpoint
// grains of those partitions and keeps their history; a search is answered
// by any node from all of them.

// gate is a receiver that answers a fixed status (with Retry-After: 1)
// while closed, and lets webhooks through to a timedReceiver once opened.
type gate struct {
	*timedReceiver
	mu     sync.Mutex // guards the fields below
	status int        // answered while closed; 0: open
	closed int        // requests answered while closed
}

func (g *gate) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	g.mu.Lock()
	status := g.status
	if status != 0 {
		g.closed++
	}
	g.mu.Unlock()
	if status != 0 {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(status)
		return
	}
	g.timedReceiver.ServeHTTP(w, req)
}

func (g *gate) set(status int) {
	g.mu.Lock()
	g.status = status
	g.mu.Unlock()
}

func (g *gate) refused() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// createGated creates n endpoints of the tenant behind gates answering
// status, subscribed to the event types given.
func createGated(t *testing.T, a *api, n int, status int, eventTypes ...string) ([]*hook, []*gate) {
	t.Helper()
	var hooks []*hook
	var gates []*gate
	for i := range n {
		g := &gate{timedReceiver: &timedReceiver{receiver: &receiver{seen: map[string]int{}}}, status: status}
		srv := httptest.NewServer(g)
		t.Cleanup(srv.Close)
		id := fmt.Sprintf("ep_%02d", i)
		created := must(a.endpoints().CreateEndpoint(a.ctx(), &controlv1.CreateEndpointRequest{
			EndpointId: id, Settings: &controlv1.EndpointSettings{Url: srv.URL + "/in", EventTypes: eventTypes},
		}))
		wh, err := standardwebhooks.NewWebhook(created.GetSecret())
		if err != nil {
			t.Fatal(err)
		}
		g.receiver.mu.Lock()
		g.wh = wh
		g.receiver.mu.Unlock()
		// A chosen id gets its tenant's tag: the endpoint's id is the answer's.
		hooks = append(hooks, &hook{id: created.GetEndpoint().GetEndpointId(), rcv: g.timedReceiver})
		gates = append(gates, g)
	}
	return hooks, gates
}

// publishAll publishes n events of the given types, in turn, through a,
// and returns the planned deliveries (delivery id -> endpoint).
func publishAll(t *testing.T, a *api, prefix string, n int, types ...string) map[string]string {
	t.Helper()
	planned := map[string]string{}
	for i := range n {
		data, _ := structpb.NewValue(map[string]any{"n": float64(i)})
		resp := must(a.events().Publish(a.ctx(), &controlv1.PublishRequest{
			EventId: prefix + strconv.Itoa(i), Type: types[i%len(types)], Data: data,
		}))
		for _, d := range resp.GetDeliveries() {
			planned[d.GetDeliveryId()] = d.GetEndpointId()
		}
	}
	return planned
}

// TestPartitionMovesWhileDue: two nodes hold deliveries that are due for a
// retry (every receiver answers 503 with Retry-After); a third node joins
// and takes a share of the delivery partitions, catching them up from the
// log, while those retries are due; then the receivers recover. Every
// delivery is received and ends succeeded, the endpoints that moved are
// attempted by the new node, and no delivery is received twice.
func TestPartitionMovesWhileDue(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	f := newFleet(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	first := f.start(dirs[0])
	nodes := []*node{first, f.start(dirs[1], first.gossip(t))}
	waitMembers(t, nodes...)
	t.Cleanup(func() { stopAll(t, nodes...) })
	defer dumpLogs(t, nodes...)

	tenant := nodes[0].as(t, newTenant(t, nodes[0]))
	// 24 endpoints: the joining node takes about a third of the partitions,
	// and with 12 none of them was its in about one run of a hundred.
	hooks, gates := createGated(t, tenant, 24, http.StatusServiceUnavailable, "order.shipped")
	planned := publishAll(t, tenant, "mv_", 5, "order.shipped")
	if len(planned) != 120 {
		t.Fatalf("planned %d deliveries, want 120", len(planned))
	}
	waitForLong(t, 60*time.Second, func() (string, bool) {
		for i, g := range gates {
			if g.refused() == 0 {
				return fmt.Sprintf("endpoint %s has had no attempt yet", hooks[i].id), false
			}
		}
		return "", true
	})

	joined := time.Now()
	nodes = append(nodes, f.start(dirs[2], first.gossip(t)))
	waitMembers(t, nodes...)
	// The new node owns its share once its partitions are live.
	waitForLong(t, 60*time.Second, func() (string, bool) {
		live, ok := nodeMetric(t, nodes[2], "hookline_partitions_live")
		return fmt.Sprintf("the new node serves %v partitions", live), ok && live > events.Partitions/6
	})
	// Let retries of the moved deliveries run on the new node while the
	// receivers still refuse, then open the gates.
	moved := waitForLong(t, 60*time.Second, func() ([]string, bool) {
		var eps []string
		for ep, idx := range placement(nodes, joined, time.Now().Add(time.Hour)) {
			if slices.Contains(idx, 2) {
				eps = append(eps, ep)
			}
		}
		return eps, len(eps) > 0
	})
	for _, g := range gates {
		g.set(0)
	}
	tl := waitReceived(t, hooks, planned, 120*time.Second)
	if d := tl.duplicates(); d != 0 {
		t.Errorf("%d deliveries were received more than once", d)
	}
	f.waitTerminal(t, planned)
	// History, from any node, agrees: nothing is pending.
	apis := make([]*api, len(nodes))
	for i, n := range nodes {
		apis[i] = n.as(t, tenant.token)
	}
	waitHistory(t, apis, planned)
	for i, a := range apis {
		resp := must(a.deliveriesClient().ListDeliveries(a.ctx(), &controlv1.ListDeliveriesRequest{Status: "pending"}))
		if len(resp.GetDeliveries()) != 0 {
			t.Errorf("node %d: %d deliveries still pending in history", i, len(resp.GetDeliveries()))
		}
	}
	slices.Sort(moved)
	t.Logf("FIGURE partition move: endpoints attempted on the joining node while their retries were due: %v; %d deliveries received, %d duplicates",
		moved, tl.unique, tl.duplicates())
}

// waitHistory waits until the search of every node lists each planned
// delivery as ended. The log holds the outcomes (waitTerminal) a moment
// before the members' history projections have applied them.
func waitHistory(t *testing.T, apis []*api, planned map[string]string) {
	t.Helper()
	for i, a := range apis {
		waitForLong(t, 30*time.Second, func() (string, bool) {
			ended, cursor := 0, ""
			for {
				resp, err := a.deliveriesClient().ListDeliveries(a.ctx(), &controlv1.ListDeliveriesRequest{PageSize: 100, Cursor: cursor})
				if err != nil {
					return fmt.Sprintf("node %d: %v", i, err), false
				}
				for _, d := range resp.GetDeliveries() {
					if _, ok := planned[d.GetDeliveryId()]; ok && d.GetStatus() != "pending" {
						ended++
					}
				}
				if cursor = resp.GetNextCursor(); cursor == "" {
					break
				}
			}
			return fmt.Sprintf("node %d's history shows %d of %d deliveries ended", i, ended, len(planned)), ended == len(planned)
		})
	}
}

// TestSearchSameOnEveryNode: with three nodes, each keeping the history of
// its own partitions, every node answers every search with the same pages
// and the same cursors, and a cursor from one node continues on another;
// every page but the last is full, although each member is asked for its
// share of a page at first.
func TestSearchSameOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	f := newFleet(t)
	nodes, _ := f.startThree(t)
	defer dumpLogs(t, nodes...)
	tenant := nodes[0].as(t, newTenant(t, nodes[0]))
	hooks, gates := createGated(t, tenant, 9, 0, "invoice.paid", "order.shipped")
	for _, g := range gates[6:] {
		g.set(http.StatusBadRequest) // permanent: these deliveries end failed
	}
	planned := publishAll(t, tenant, "s_", 24, "invoice.paid", "order.shipped")
	f.waitTerminal(t, planned)
	waitForLong(t, 30*time.Second, func() (string, bool) {
		tl := countReceived(hooks[:6], planned)
		want := 0
		for _, ep := range planned {
			if slices.ContainsFunc(hooks[:6], func(h *hook) bool { return h.id == ep }) {
				want++
			}
		}
		return fmt.Sprintf("%d of %d received", tl.unique, want), tl.unique == want
	})

	apis := make([]*api, len(nodes))
	for i, n := range nodes {
		apis[i] = n.as(t, tenant.token)
	}
	waitHistory(t, apis, planned)
	queries := []*controlv1.ListDeliveriesRequest{
		{},
		{PageSize: 7},
		{PageSize: 1},
		{EndpointId: hooks[3].id, PageSize: 4},
		{EndpointId: hooks[3].id, PageSize: 20}, // one member's: more than its first share of a page
		{Status: "failed", PageSize: 10},
		{Status: "succeeded", PageSize: 25},
		{EventType: "order.shipped", PageSize: 6},
		{EventType: "invoice.paid", EndpointId: hooks[7].id, PageSize: 2},
	}
	for qi, q := range queries {
		var want []string
		cursors := make([]string, len(nodes)) // each node's cursor for the next page
		for page := 0; ; page++ {
			var ids [][]string
			prev := slices.Clone(cursors)
			for i, a := range apis {
				r := proto.CloneOf(q)
				r.Cursor = prev[(i+page)%len(nodes)] // each page asks with another node's cursor
				resp, err := a.deliveriesClient().ListDeliveries(a.ctx(), r)
				if err != nil {
					t.Fatalf("query %d page %d on node %d: %v", qi, page, i, err)
				}
				var got []string
				for _, d := range resp.GetDeliveries() {
					got = append(got, d.GetDeliveryId())
				}
				ids = append(ids, got)
				cursors[i] = resp.GetNextCursor()
			}
			for i := 1; i < len(nodes); i++ {
				if !slices.Equal(ids[0], ids[i]) || cursors[0] != cursors[i] {
					t.Fatalf("query %d page %d: node 0 answered %v (next %q), node %d %v (next %q)", qi, page, ids[0], cursors[0], i, ids[i], cursors[i])
				}
			}
			want = append(want, ids[0]...)
			if cursors[0] == "" {
				break
			}
			if size := cmp.Or(int(q.GetPageSize()), 50); len(ids[0]) != size {
				t.Errorf("query %d page %d: %d deliveries and a next page: a page holds %d until the last", qi, page, len(ids[0]), size)
			}
			if page > 300 {
				t.Fatalf("query %d does not end", qi)
			}
		}
		if len(want) == 0 {
			t.Errorf("query %d (%v) found nothing: it proves nothing", qi, q)
		}
		if qi == 0 && len(want) != len(planned) {
			t.Errorf("the unfiltered search found %d deliveries, %d were planned", len(want), len(planned))
		}
	}
	// One delivery read from each node: the same attempts.
	for id := range planned {
		var counts []int
		for _, a := range apis {
			d := must(a.deliveriesClient().GetDelivery(a.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: id}))
			counts = append(counts, len(d.GetAttempts()))
		}
		if counts[0] == 0 || counts[0] != counts[1] || counts[0] != counts[2] {
			t.Errorf("delivery %s: attempts per node %v", id, counts)
		}
		break
	}
}

// nodeMetric reads one metric from a node's /metrics.
func nodeMetric(t *testing.T, n *node, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + n.httpAddr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if len(line) > len(name) && line[:len(name)] == name && line[len(name)] == ' ' {
			v, err := strconv.ParseFloat(line[len(name)+1:], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestPublishOnAnotherNodeSeesNewEndpoint: each node applies the registry
// from the log, so an endpoint created through one node must be in the
// plan of a publish made through another right after the create answered.
func TestPublishOnAnotherNodeSeesNewEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	f := newFleet(t)
	nodes, _ := f.startThree(t)
	defer dumpLogs(t, nodes...)
	key := newTenant(t, nodes[0])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(srv.Close)
	for i := range 20 {
		a, b := nodes[i%3].as(t, key), nodes[(i+1)%3].as(t, key)
		created := must(a.endpoints().CreateEndpoint(a.ctx(), &controlv1.CreateEndpointRequest{
			Settings: &controlv1.EndpointSettings{Url: srv.URL + "/" + strconv.Itoa(i), EventTypes: []string{"t" + strconv.Itoa(i)}},
		}))
		resp := must(b.events().Publish(b.ctx(), &controlv1.PublishRequest{EventId: "x" + strconv.Itoa(i), Type: "t" + strconv.Itoa(i), Payload: []byte(`{}`)}))
		if len(resp.GetDeliveries()) != 1 || resp.GetDeliveries()[0].GetEndpointId() != created.GetEndpoint().GetEndpointId() {
			t.Errorf("publish %d through node %d, right after the endpoint was created through node %d: planned %v, want endpoint %s",
				i, (i+1)%3, i%3, resp.GetDeliveries(), created.GetEndpoint().GetEndpointId())
		}
	}
}
