package endpoint_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestLoopStalePull: a pull issued while an outcome was being appended
// (the projections lag: they hold at the grain's previous append) shows
// the delivery as it was before that outcome, after the grain let go of
// it. The grain must not attempt it again before its next_attempt_at.
// Before, it attempted it at once, ignoring the backoff: the cause of the
// intermittent TestLoopDeadline failure.
func TestLoopStalePull(t *testing.T) {
	var fl *faultLog
	b := newBenchWith(t, func(l events.Log) events.Log { fl = newFaultLog(l); return fl })
	watch := &logWatch{}
	b.cfg.Logger = slog.New(watch)
	releaseX, releaseY := make(chan struct{}), make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		release, code := releaseY, http.StatusOK
		if strings.Contains(r.Header.Get("webhook-id"), "x") {
			release, code = releaseX, http.StatusServiceUnavailable
		}
		if n > 1 {
			w.WriteHeader(http.StatusOK)
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(code)
	})
	b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 2 })
	var x, y string
	for i := 0; x == "" || y == ""; i++ { // delivery ids with and without an "x", to tell them apart
		id := events.DeliveryID("acme", fmt.Sprint("evt_", i), "ep_1")
		switch {
		case x == "" && strings.Contains(id, "x"):
			x = b.publish("acme", fmt.Sprint("evt_", i), "ep_1")[0]
		case y == "" && !strings.Contains(id, "x"):
			y = b.publish("acme", fmt.Sprint("evt_", i), "ep_1")[0]
		}
	}
	rc.waitActive(t, 2)
	head, err := b.log.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fl.holdSubscription(&head) // the projections stop here
	close(releaseY)
	waitUntil(t, "y's outcome recorded", func() bool { return watch.sawWith("delivery event recorded", y) })
	b.wakes.Wake("ep_1") // a wake: the pull waits for the projections to have y's outcome
	close(releaseX)
	waitUntil(t, "x's outcome recorded, while that pull waits", func() bool { return watch.sawWith("delivery event recorded", x) })
	recs, err := b.log.ReadStream(t.Context(), events.DeliveryStream(y), events.Forwards, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	fl.holdSubscription(&recs[0].Position) // up to y's outcome only: the pull runs, x looks new
	waitUntil(t, "the grain skipping x in the stale pull", func() bool { return watch.saw("settled since") || rc.count(x) > 1 })
	if n := rc.count(x); n != 1 {
		t.Fatalf("x was attempted %d times at once, before its next attempt time", n)
	}
	fl.holdSubscription(nil)
	evs := b.waitEvents(x, 1)
	next := evs[0].(*hooklinev1.AttemptFailed).GetNextAttemptAt().AsTime()
	b.advance(next.Sub(b.clk.Now()))
	evs = b.waitEvents(x, 2)
	if s, ok := evs[1].(*hooklinev1.AttemptSucceeded); !ok || !s.GetAttempt().GetStartedAt().AsTime().Equal(next) {
		t.Fatalf("x's second attempt: %v, want a success at %v", evs[1], next)
	}
}

// TestLoopPullsWhileProjectionsLag: once a pull has shown a delivery the
// grain settled since (the projections lag behind its appends), the next
// pull waits only a short while for them before it pulls anyway: the
// index already holds other work for the endpoint, and a runner far
// behind (a node at its limit) must not stall the endpoint for the whole
// IO timeout on every pull. Before, each such pull waited the IO timeout
// (here one minute) and the work waited with it.
func TestLoopPullsWhileProjectionsLag(t *testing.T) {
	var fl *faultLog
	b := newBenchWith(t, func(l events.Log) events.Log { fl = newFaultLog(l); return fl })
	b.cfg.IOTimeout = time.Minute
	// The held delivery comes first in the index (same due time: by
	// delivery id), so that every pull after its outcome shows it, stale.
	var rest []string
	for i := range 4 {
		rest = append(rest, fmt.Sprint("evt_", i))
	}
	firstEvent := ""
	for i := 0; firstEvent == ""; i++ {
		ev := fmt.Sprint("evt_first_", i)
		id := events.DeliveryID("acme", ev, "ep_1")
		if !slices.ContainsFunc(rest, func(e string) bool { return events.DeliveryID("acme", e, "ep_1") < id }) {
			firstEvent = ev
		}
	}
	release, held := make(chan struct{}), events.DeliveryID("acme", firstEvent, "ep_1")
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get("webhook-id") == held {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 1 })
	b.publish("acme", firstEvent, "ep_1")
	rc.waitActive(t, 1)
	for i, ev := range rest {
		rest[i] = b.publish("acme", ev, "ep_1")[0]
	}
	head, err := b.log.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.runner.WaitFor(t.Context(), head); err != nil {
		t.Fatal(err)
	}
	fl.holdSubscription(&head) // every plan applied; no outcome from now on
	close(release)
	waitUntil(t, "the other deliveries, while the projections hold", func() bool {
		for _, id := range rest {
			if rc.count(id) == 0 {
				return false
			}
		}
		return true
	})
	if n := rc.count(held); n != 1 {
		t.Errorf("the held delivery was attempted %d times", n)
	}
	fl.holdSubscription(nil)
}
