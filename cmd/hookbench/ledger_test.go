package main

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestLedgerCount counts a ledger against a receiver's records by hand:
// what the bench expects comes from the endpoints it created, not from
// the node's answers, and every check counts what it says.
func TestLedgerCount(t *testing.T) {
	// Tenant acme: type a goes to endpoints e0 and e1, type b to e1.
	acme := &Tenant{ID: "acme", Await: true,
		subs:  map[string][]string{"a": {"e0", "e1"}, "b": {"e1"}},
		names: map[string]string{"e0_x": "e0", "e1_x": "e1", "e9_x": "e9"}}
	planned := func(pairs ...string) *controlv1.PublishResponse {
		r := &controlv1.PublishResponse{}
		for i := 0; i < len(pairs); i += 2 {
			r.Deliveries = append(r.Deliveries, &hooklinev1.PlannedDelivery{DeliveryId: pairs[i], EndpointId: pairs[i+1]})
		}
		return r
	}
	pub := func(id, typ string) *controlv1.PublishRequest {
		return &controlv1.PublishRequest{EventId: id, Type: typ, Payload: []byte(`{"id":"` + id + `"}`)}
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	acme.Endpoints = []string{"e0", "e1", "e5"}
	l := newLedger()
	l.addTenant(acme)
	l.record(acme, []*controlv1.PublishRequest{pub("ev1", "a"), pub("ev2", "a"), pub("ev3", "b"), pub("ev4", "b")}, []*controlv1.PublishResponse{
		planned("d1", "e0_x", "d2", "e1_x"), // as expected
		planned("d3", "e0_x"),               // e1 left out of the plan: a mismatch, and lost
		planned("d5", "e1_x", "d6", "e9_x"), // e9 never subscribed to b: a mismatch
		planned("d7", "e1_x"),
	}, at(0), at(0.1), 0)
	// Another tenant's event of the same id is another event.
	globex := &Tenant{ID: "globex", Await: true, Endpoints: []string{"g0"},
		subs: map[string][]string{"a": {"g0"}}, names: map[string]string{"g0_x": "g0"}}
	l.addTenant(globex)
	l.record(globex, []*controlv1.PublishRequest{pub("ev1", "a")}, []*controlv1.PublishResponse{planned("g1", "g0_x")}, at(0), at(0.1), 0)
	l.disturbed("kill", at(5), at(6))

	r, err := NewReceiver("127.0.0.1:0", nil, Behaviour{})
	if err != nil {
		t.Fatal(err)
	}
	body := func(id string) []byte { return []byte(`{"id":"` + id + `"}`) }
	r.record("d1", "ev1", "e0", body("ev1"), 200, at(1))
	r.record("d1", "ev1", "e0", body("ev1"), 200, at(7)) // a repeat across the kill: explained
	r.record("d2", "ev1", "e1", body("ev1"), 500, at(1))
	r.record("d2", "ev1", "e1", body("ev1"), 200, at(2))
	r.record("d2", "ev1", "e1", body("ev1"), 200, at(3))             // a repeat with nothing between: unexplained
	r.record("d3", "ev2", "e0", []byte(`{"id":"ev2!"}`), 200, at(1)) // other bytes: mismatch and lost
	if nth := r.record("d5", "ev3", "e1", body("ev3"), 200, at(1)); nth != 0 {
		t.Fatalf("first 2xx of d5 is number %d", nth)
	}
	r.cut("d5", 0)                                       // its sender had gone
	r.record("d5", "ev3", "e1", body("ev3"), 200, at(2)) // so the repeat is explained
	r.record("d7", "ev4", "e1", body("ev4"), 200, at(1))
	r.record("g1", "ev1", "g0", body("ev1"), 200, at(1))
	r.record("dx", "ev4", "e1", body("ev4"), 200, at(1)) // another id for an expected delivery
	r.record("dy", "ev9", "e0", body("ev9"), 200, at(1)) // an event nobody published
	r.record("dz", "ev1", "e5", body("ev1"), 200, at(1)) // an endpoint the event does not go to

	got := l.count(r, scope{since: t0})
	want := tally{Expected: 7, Planned: 6, Deliveries: 5, Attempts: 10,
		Checks: Checks{Lost: 2, PlannedMismatch: 2, Unplanned: 3, BodyMismatch: 1, Duplicates: 3, Unexplained: 1}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(tally{}), cmpopts.IgnoreFields(tally{}, "Examples")); diff != "" {
		t.Errorf("count (-want +got):\n%s", diff)
	}
	if n := len(got.Examples); n != 5 {
		t.Errorf("%d examples, want one per lost delivery, mismatched event and unexplained duplicate (5): %v", n, got.Examples)
	}
	if n := len(got.firstAttempt); n != 5 {
		t.Errorf("%d first-attempt latencies, want one per delivery (5)", n)
	}
	// The run waits for what the node announced, lost or not.
	if n := l.announcedAwaited(); n != 6 {
		t.Errorf("announced %d, want 6", n)
	}
	if n := l.unreceived(r); n != 0 {
		t.Errorf("unreceived %d, want 0 (each announced id was answered 2xx)", n)
	}
}

// TestJudge: a summary passes only when every check is 0 and something was
// delivered; an unexplained duplicate fails it, and so it does a fault of
// the acceptance run.
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Summary
		want []string
	}{
		{"clean", Summary{Expected: 10, Deliveries: 10, Checks: Checks{Duplicates: 2}}, nil},
		{"nothing delivered", Summary{}, []string{"nothing delivered (0 expected)"}},
		{"unexplained", Summary{Expected: 10, Deliveries: 10, Checks: Checks{Duplicates: 2, Unexplained: 1}}, []string{"duplicates_unexplained 1"}},
		{"every check", Summary{Expected: 10, Deliveries: 8, Checks: Checks{Lost: 2, PlannedMismatch: 1, Unplanned: 3, BadSignature: 4, BodyMismatch: 5}},
			[]string{"lost 2", "planned_mismatch 1", "unplanned 3", "bad_signature 4", "body_mismatch 5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.judge()
			if diff := cmp.Diff(tc.want, s.Failed); diff != "" || s.Pass != (tc.want == nil) {
				t.Errorf("pass %v, failed (-want +got):\n%s", s.Pass, diff)
			}
		})
	}
	r := FaultResult{Expected: 10, Checks: Checks{Duplicates: 3, Unexplained: 1}, Reconcile: "clean"}
	judge(&r)
	if r.Pass || len(r.Why) != 1 {
		t.Errorf("a fault with an unexplained duplicate: pass %v, why %v", r.Pass, r.Why)
	}
}

// TestLedgerOrder counts order violations against the order the bench
// published each key's events in: the key's next event, or a repeat of
// the last one accepted, is in order; a later one before an earlier was
// accepted, or an older one again, is not. Each endpoint is judged on the
// events it subscribed to.
func TestLedgerOrder(t *testing.T) {
	acme := &Tenant{ID: "acme", Await: true, Endpoints: []string{"e0", "e1"},
		subs:  map[string][]string{"a": {"e0", "e1"}, "b": {"e1"}},
		names: map[string]string{"e0_x": "e0", "e1_x": "e1"}}
	pub := func(id, typ, key string) *controlv1.PublishRequest {
		return &controlv1.PublishRequest{EventId: id, Type: typ, OrderingKey: key, Payload: []byte(id)}
	}
	l := newLedger()
	l.addTenant(acme)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	// Key k: ev1 (a), ev2 (b: e1 only), ev3 (a); key j: ev4 (a).
	l.record(acme, []*controlv1.PublishRequest{pub("ev1", "a", "k"), pub("ev4", "a", "j")}, make([]*controlv1.PublishResponse, 2), t0, t0, 0)
	l.record(acme, []*controlv1.PublishRequest{pub("ev2", "b", "k")}, make([]*controlv1.PublishResponse, 1), t0, t0, 0)
	l.record(acme, []*controlv1.PublishRequest{pub("ev3", "a", "k")}, make([]*controlv1.PublishResponse, 1), t0, t0, 0)

	r, err := NewReceiver("127.0.0.1:0", nil, Behaviour{})
	if err != nil {
		t.Fatal(err)
	}
	arrive := func(ep, key, ev string, status int) { r.recordOrdered(ep, key, ev, 0, status) }
	// e0 gets k's ev1 then ev3 (ev2 is not its): in order, with a retry
	// and a repeat of the last accepted.
	arrive("e0", "k", "ev1", 503)
	arrive("e0", "k", "ev1", 200)
	arrive("e0", "k", "ev1", 200)
	arrive("e0", "k", "ev3", 200)
	// e1 gets k's ev3 before ev2 was accepted (1), then ev1 again after
	// ev2 was (2).
	arrive("e1", "k", "ev1", 200)
	arrive("e1", "k", "ev2", 500)
	arrive("e1", "k", "ev3", 200)
	arrive("e1", "k", "ev2", 200)
	arrive("e1", "k", "ev1", 200)
	arrive("e1", "j", "ev4", 200)

	var tl tally
	l.orderViolations(r, scope{}, &tl)
	if tl.OrderViolations != 2 {
		t.Errorf("order violations = %d, want 2; examples %v", tl.OrderViolations, tl.Examples)
	}

	// A later phase's count: the earlier phase's events still move the
	// key on, and are not judged again.
	l.record(acme, []*controlv1.PublishRequest{pub("ev5", "a", "j")}, make([]*controlv1.PublishResponse, 1), t0, t0, 1)
	arrive("e0", "j", "ev4", 200)
	arrive("e0", "j", "ev5", 200)
	tl = tally{}
	l.orderViolations(r, scope{phases: []int{1}}, &tl)
	if tl.OrderViolations != 0 {
		t.Errorf("phase 1: order violations = %d, want 0; examples %v", tl.OrderViolations, tl.Examples)
	}
}

// TestLedgerSlow places the slow first attempts of a phase by the second
// of their publish's answer, and counts only that phase's deliveries.
func TestLedgerSlow(t *testing.T) {
	acme := &Tenant{ID: "acme", Await: true, Endpoints: []string{"e0"},
		subs: map[string][]string{"a": {"e0"}}, names: map[string]string{"e0_x": "e0"}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	body := func(id string) []byte { return []byte(`{"id":"` + id + `"}`) }
	l := newLedger()
	l.addTenant(acme)
	publish := func(id string, ack float64, phase int) {
		l.record(acme, []*controlv1.PublishRequest{{EventId: id, Type: "a", Payload: body(id)}},
			[]*controlv1.PublishResponse{{Deliveries: []*hooklinev1.PlannedDelivery{{DeliveryId: "d" + id, EndpointId: "e0_x"}}}}, at(ack-0.01), at(ack), phase)
	}
	publish("ev1", 0.2, 2) // fast
	publish("ev2", 1.5, 2) // slow, second 1
	publish("ev3", 1.7, 2) // slow, second 1
	publish("ev4", 3.1, 2) // slow, second 3
	publish("ev5", 1.5, 1) // slow, another phase
	publish("ev6", 4.0, 2) // never received
	r, err := NewReceiver("127.0.0.1:0", nil, Behaviour{})
	if err != nil {
		t.Fatal(err)
	}
	for id, seen := range map[string]float64{"ev1": 0.21, "ev2": 1.9, "ev3": 2.0, "ev4": 3.3, "ev5": 2.5} {
		r.record("d"+id, id, "e0", body(id), 200, at(seen))
	}
	bySecond, total, list := l.slow(r, 2, 100*time.Millisecond, t0)
	if total != 4 {
		t.Errorf("total = %d, want the 4 deliveries of phase 2 received", total)
	}
	if want := map[int]int{1: 2, 3: 1}; !maps.Equal(bySecond, want) {
		t.Errorf("by second = %v, want %v", bySecond, want)
	}
	ms := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Millisecond) }
	var got []slowAttempt
	for _, a := range list {
		got = append(got, slowAttempt{At: a.At.Round(time.Millisecond), Delay: a.Delay.Round(time.Millisecond), Endpoint: a.Endpoint, ID: a.ID})
	}
	want := []slowAttempt{{At: ms(1.5), Delay: ms(0.4), Endpoint: "e0", ID: "dev2"}, {At: ms(1.7), Delay: ms(0.3), Endpoint: "e0", ID: "dev3"},
		{At: ms(3.1), Delay: ms(0.2), Endpoint: "e0", ID: "dev4"}}
	if !slices.Equal(got, want) {
		t.Errorf("list = %v, want %v", got, want)
	}
}

// TestLedgerAnswersAndLongestWait checks the publishing side of a run's
// figures by hand: when each endpoint's publishes were answered, and the
// longest a delivery answered in a window waited for its first arrival,
// one never received counting until now.
func TestLedgerAnswersAndLongestWait(t *testing.T) {
	acme := &Tenant{ID: "acme", Await: true, Endpoints: []string{"e0", "e1"},
		subs: map[string][]string{"a": {"e0"}, "b": {"e0", "e1"}}, names: map[string]string{"e0_x": "e0", "e1_x": "e1"}}
	quiet := &Tenant{ID: "quiet", Endpoints: []string{"q0"}, // not awaited: left out
		subs: map[string][]string{"a": {"q0"}}, names: map[string]string{"q0_x": "q0"}}
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	body := func(id string) []byte { return []byte(`{"id":"` + id + `"}`) }
	l := newLedger()
	l.addTenant(acme)
	l.addTenant(quiet)
	publish := func(tn *Tenant, id, typ string, ack float64) {
		var ds []*hooklinev1.PlannedDelivery
		for _, ep := range tn.subs[typ] {
			ds = append(ds, &hooklinev1.PlannedDelivery{DeliveryId: id + "-" + ep, EndpointId: ep + "_x"})
		}
		l.record(tn, []*controlv1.PublishRequest{{EventId: id, Type: typ, Payload: body(id)}},
			[]*controlv1.PublishResponse{{Deliveries: ds}}, at(ack-0.01), at(ack), 0)
	}
	publish(acme, "ev1", "a", 1)
	publish(acme, "ev2", "b", 2)
	publish(acme, "ev3", "a", 3)
	publish(acme, "ev4", "b", 4) // e1's copy never arrives
	publish(quiet, "ev9", "a", 2)

	got := l.answers()
	for ep := range got {
		slices.SortFunc(got[ep], func(a, b time.Time) int { return a.Compare(b) })
	}
	want := map[string][]time.Time{"e0": {at(1), at(2), at(3), at(4)}, "e1": {at(2), at(4)}}
	if !maps.EqualFunc(got, want, func(a, b []time.Time) bool { return slices.EqualFunc(a, b, time.Time.Equal) }) {
		t.Errorf("answers = %v, want %v", got, want)
	}

	r, err := NewReceiver("127.0.0.1:0", nil, Behaviour{})
	if err != nil {
		t.Fatal(err)
	}
	r.record("ev1-e0", "ev1", "e0", body("ev1"), 200, at(1.1))
	r.record("ev2-e0", "ev2", "e0", body("ev2"), 200, at(2.1))
	r.record("ev2-e1", "ev2", "e1", body("ev2"), 200, at(3.5)) // the longest of [2, 3.5)
	r.record("ev3-e0", "ev3", "e0", body("ev3"), 200, at(3.2))
	r.record("ev4-e0", "ev4", "e0", body("ev4"), 200, at(4.1))
	r.record("ev9-q0", "ev9", "q0", body("ev9"), 200, at(9)) // not awaited

	if d, id := l.longestWait(r, at(2), at(3.5), at(10)); d != 1500*time.Millisecond || id != "ev2-e1" {
		t.Errorf("longest wait in [2, 3.5) = %v (%s), want 1.5s (ev2-e1)", d, id)
	}
	if d, id := l.longestWait(r, at(3.5), at(5), at(10)); d != 6*time.Second || id != "ev4-e1" {
		t.Errorf("longest wait in [3.5, 5) = %v (%s), want 6s (ev4-e1, not received: until now)", d, id)
	}
	if d, _ := l.longestWait(r, at(5), at(9), at(10)); d != 0 {
		t.Errorf("longest wait with no publish answered = %v, want 0", d)
	}
}
