//go:build !race

// Three nodes in one process race inside protoactor-go; .ci/run runs this
// file without -race (see server_test.go).

package node_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestHandOverTwiceWhileAnAttemptRuns moves a partition twice while its
// first owner still runs an attempt: the first owner (a) stops while its
// receiver holds the attempt open, and hands the partition to a second
// (x), which holds the delivery for a; then x stops too, and hands it to
// the third (y). x's hand-over lists a's attempt beside its own (none), so
// y does not attempt the delivery while a still sends it, and counts it
// against the endpoint's in-flight limit (1): the endpoint's next delivery
// waits too. Once the receiver answers, a records the outcome; the
// delivery ends succeeded after one attempt, received once. Before, x's
// hand-over listed only the attempts x ran, and y attempted the delivery a
// second time while a's attempt was still open.
func TestHandOverTwiceWhileAnAttemptRuns(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	a := startServer(t, l, filepath.Join(dir, "a"))
	b := startServer(t, l, filepath.Join(dir, "b"), a.srv.Node().GossipAddress())
	c := startServer(t, l, filepath.Join(dir, "c"), a.srv.Node().GossipAddress())
	nodes := []*testServer{a, b, c}
	poll(t, 30*time.Second, "the three nodes serve their shares", func() bool {
		var all events.PartitionSet
		for _, n := range nodes {
			if n.srv.Serving().IsEmpty() {
				return false
			}
			all = all.Union(n.srv.Serving())
		}
		return all.Len() == events.Partitions
	})
	recv := newArrivals(t)
	key := tenantWithKey(t, a)
	kctx, kcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer kcancel()
	kctx = metadata.AppendToOutgoingContext(kctx, "authorization", "Bearer "+key)
	api := controlv1.NewEndpointServiceClient(a.cc)

	// Two endpoints of one partition that a serves: one whose receiver
	// holds its attempt, one that answers at once (a witness).
	var slow, fast string
	byPart := map[events.Partition]string{}
	for i := 0; fast == ""; i++ {
		if i == 300 {
			t.Fatal("no two of 300 endpoints share a partition of a")
		}
		r, err := api.CreateEndpoint(kctx, &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
			Url: fmt.Sprintf("%s/e%d", recv.URL, i), EventTypes: []string{fmt.Sprintf("order.e%d", i)}, TimeoutMs: 25000, MaxInFlight: 1,
		}})
		if err != nil {
			t.Fatal(err)
		}
		id := r.GetEndpoint().GetEndpointId()
		p := events.PartitionOf(id)
		if first, ok := byPart[p]; ok && a.srv.Serving().Has(p) {
			slow, fast = first, id
		}
		byPart[p] = id
	}
	part := events.PartitionOf(slow)
	settings := func(id string) *controlv1.EndpointSettings {
		ep, err := api.GetEndpoint(kctx, &controlv1.GetEndpointRequest{EndpointId: id})
		if err != nil {
			t.Fatal(err)
		}
		return ep.GetSettings()
	}
	slowType, fastType := settings(slow).GetEventTypes()[0], settings(fast).GetEventTypes()[0]
	recv.hold(settings(slow).GetUrl())
	defer recv.open()
	evs := controlv1.NewEventServiceClient(c.cc)
	publish := func(id, typ string) string {
		t.Helper()
		res, err := evs.Publish(kctx, &controlv1.PublishRequest{EventId: id, Type: typ, Payload: []byte(`{"id":"` + id + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetDeliveries()[0].GetDeliveryId()
	}
	held := publish("held_1", slowType)
	poll(t, 30*time.Second, "the held attempt reaches the receiver", func() bool { return recv.count(held) == 1 })

	// a stops: it hands the partition over at once and finishes its
	// attempt meanwhile (it stops once the receiver answers).
	stoppedA := make(chan struct{})
	go func() { defer close(stoppedA); a.stop(t) }()
	var x, y *testServer
	poll(t, 20*time.Second, "another node serves the partition", func() bool {
		for _, n := range []*testServer{b, c} {
			if n.srv.Serving().Has(part) {
				x = n
			}
		}
		return x != nil
	})
	y = map[*testServer]*testServer{b: c, c: b}[x]
	// x stops while a's attempt is still open: it hands the partition to y.
	stoppedX := make(chan struct{})
	go func() { defer close(stoppedX); x.stop(t) }()
	poll(t, 20*time.Second, "the third node serves the partition", func() bool { return y.srv.Serving().Has(part) })

	evs = controlv1.NewEventServiceClient(y.cc)
	witness := publish("paid_1", fastType)
	poll(t, 10*time.Second, "the witness delivered by the third node", func() bool { return recv.count(witness) == 1 })
	next := publish("held_2", slowType)
	witness2 := publish("paid_2", fastType)
	poll(t, 10*time.Second, "the second witness delivered", func() bool { return recv.count(witness2) == 1 })
	if n := recv.count(held); n != 1 {
		t.Errorf("the held delivery reached the receiver %d times while a's attempt was open; want once", n)
	}
	if n := recv.count(next); n != 0 {
		t.Errorf("the held endpoint's next delivery reached the receiver while a's attempt was open: its in-flight limit of 1 counts that attempt")
	}
	var listed bool
	for _, h := range handOvers(t, l) {
		if h.GetPrevious() != x.srv.Node().Address() {
			continue
		}
		for _, r := range h.GetRunning() {
			listed = listed || (r.GetDeliveryId() == held && r.GetEndpointId() == slow && r.GetAttempt() == 1)
		}
	}
	if !listed {
		t.Errorf("the second owner's hand-over does not list the first owner's attempt of %s", held)
	}

	recv.open()
	dapi := controlv1.NewDeliveryServiceClient(y.cc)
	poll(t, 30*time.Second, "the held delivery ends succeeded", func() bool {
		d, err := dapi.GetDelivery(kctx, &controlv1.GetDeliveryRequest{DeliveryId: held})
		return err == nil && d.GetStatus() == "succeeded"
	})
	d, err := dapi.GetDelivery(kctx, &controlv1.GetDeliveryRequest{DeliveryId: held})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetAttemptCount() != 1 {
		t.Errorf("the held delivery ended after %d attempts; want the one a ran", d.GetAttemptCount())
	}
	poll(t, 10*time.Second, "the held endpoint's next delivery received", func() bool { return recv.count(next) == 1 })
	for _, done := range []chan struct{}{stoppedA, stoppedX} {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a stopping node did not stop within 30 s of the held attempt's answer")
		}
	}
	if n := recv.count(held); n != 1 {
		t.Errorf("the held delivery reached the receiver %d times; want once", n)
	}
}

// arrivals is a receiver that counts each webhook-id as its request
// arrives, answers 200, and holds the requests to one URL until open.
type arrivals struct {
	*httptest.Server
	mu       sync.Mutex // guards the fields below
	seen     map[string]int
	heldPath string
	release  chan struct{}
	openOnce sync.Once
}

func newArrivals(t *testing.T) *arrivals {
	r := &arrivals{seen: map[string]int{}, release: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen[req.Header.Get("webhook-id")]++
		held := r.heldPath != "" && req.URL.Path == r.heldPath
		r.mu.Unlock()
		if held {
			<-r.release
		}
	}))
	t.Cleanup(r.Close)
	t.Cleanup(r.open) // before Close: a held request must end
	return r
}

// hold holds the requests to url's path from now until open.
func (r *arrivals) hold(url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heldPath = url[len(r.URL):]
}

func (r *arrivals) open() { r.openOnce.Do(func() { close(r.release) }) }

// count returns how many requests of webhook-id id arrived.
func (r *arrivals) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id]
}
