package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestChaosSchedule: a seed, a duration and a node count make one
// schedule, again and again; another seed makes another; the schedule
// keeps its lanes' rules (faults within their part of the run, a key at
// most once per batch, a pause resumed, a member joining only a cluster,
// once).
func TestChaosSchedule(t *testing.T) {
	texts := func(s chaosSchedule) []string {
		var out []string
		for _, a := range s.Actions {
			out = append(out, a.String())
		}
		return out
	}
	d := 2 * time.Minute
	a, b := newChaosSchedule(7, d, 3), newChaosSchedule(7, d, 3)
	if diff := cmp.Diff(texts(a), texts(b)); diff != "" || a.Digest() != b.Digest() {
		t.Fatalf("seed 7 made two schedules (-first +second):\n%s", diff)
	}
	if c := newChaosSchedule(8, d, 3); c.Digest() == a.Digest() {
		t.Errorf("seeds 7 and 8 made the same schedule %s", a.Digest())
	}
	for _, tc := range []struct {
		nodes int
		joins int
	}{{1, 0}, {3, 1}} {
		s := newChaosSchedule(11, d, tc.nodes)
		kinds := s.byKind()
		if kinds[actJoin] != tc.joins || (tc.nodes == 1 && kinds[actPGRestart] > 0) {
			t.Errorf("%d node(s): %d joins, %d PostgreSQL restarts", tc.nodes, kinds[actJoin], kinds[actPGRestart])
		}
		for _, k := range []chaosKind{actPublish, actURL, actPause, actErase, actReplay, actRecover, actKill} {
			if kinds[k] == 0 {
				t.Errorf("%d node(s): no %s in %v", tc.nodes, k, kinds)
			}
		}
		paused := map[[2]int]int{}
		for i, x := range s.Actions {
			if x.N != i+1 || (i > 0 && x.At < s.Actions[i-1].At) || x.At < 0 || x.At >= d {
				t.Errorf("action %s out of order or out of the run", x)
			}
			if x.Kind != actPublish && x.Kind != actRepublish && x.Kind != actResume && x.Kind != actOutageEnd &&
				(x.At < time.Duration(faultsFrom*float64(d)) || x.At >= time.Duration(faultsUntil*float64(d))) {
				t.Errorf("%s: a fault outside [%g, %g) of the run", x, faultsFrom, faultsUntil)
			}
			keys := slices.Clone(x.Keys)
			slices.Sort(keys)
			if len(slices.Compact(keys)) != len(x.Keys) {
				t.Errorf("%s: a key twice in one batch", x)
			}
			switch x.Kind {
			case actPause:
				paused[[2]int{x.Tenant, x.Endpoint}]++
			case actResume:
				paused[[2]int{x.Tenant, x.Endpoint}]--
			}
		}
		for ep, n := range paused {
			if n != 0 {
				t.Errorf("%d node(s): endpoint %v paused %d more times than resumed", tc.nodes, ep, n)
			}
		}
	}
}

// TestChaosScheduleOnly: `hookbench run chaos --schedule-only` prints the
// schedule of its seed, the same every time, and runs nothing.
func TestChaosScheduleOnly(t *testing.T) {
	out := func(seed string) string {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{"run", "chaos", "--seed", seed, "--duration", "30s", "--nodes", "1", "--schedule-only"}, &stdout, &stderr); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		return stdout.String()
	}
	first, again, other := out("3"), out("3"), out("4")
	if first != again {
		t.Errorf("seed 3 printed two schedules:\n%s", cmp.Diff(first, again))
	}
	if first == other || !strings.Contains(first, "publish t") || !strings.Contains(first, "seed 3, 30s, 1 node(s)") {
		t.Errorf("schedule of seed 3:\n%s", first)
	}
}

// chaosFixture is a calm history: tenant chaos7_t0 publishes ev1, ev2 and ev3 of
// key k, each to its endpoint chaos7_t0_e0 (ordered by key), delivered in order
// with sequences 1, 2, 3 on host h0, each answered 2xx.
func chaosFixture() *chaosFacts {
	t0 := time.Unix(1_000_000, 0)
	f := &chaosFacts{seed: 7, start: t0, keys: map[keyRef][]string{}, ordered: map[string]bool{"chaos7_t0_e0": true},
		grants: map[string][]headerGrant{"chaos7_t0_e0": {{value: "v1", host: "h0", at: t0}}}}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprint("ev", i)
		sent := t0.Add(time.Duration(i) * time.Second)
		e := &chaosEvent{id: id, tenant: "chaos7_t0", key: "k", marker: chaosMarker(7, id), body: uint64(i), sent: sent, ack: sent.Add(10 * time.Millisecond),
			endpoints: []string{"chaos7_t0_e0"}, ids: []string{fmt.Sprint("d", i)}}
		f.events = append(f.events, e)
		f.keys[keyRef{"chaos7_t0", "k"}] = append(f.keys[keyRef{"chaos7_t0", "k"}], id)
		f.seen = append(f.seen, chaosSeen{Endpoint: "chaos7_t0_e0", Host: "h0", Delivery: e.ids[0], Event: id, Key: "k", Seq: int64(i), Secret: "v1",
			Body: e.body, Status: 200, Signed: e.ack.Truncate(time.Second), Arrived: e.ack.Add(100 * time.Millisecond), Answered: e.ack.Add(120 * time.Millisecond)})
		f.steps = append(f.steps, chaosStep{Action: chaosAction{N: i, Kind: actPublish, Tenant: 0, Endpoint: -1, Node: -1, Events: 1, Keys: []int{0}},
			Began: sent, Ended: e.ack, Events: []string{id}})
	}
	return f
}

// TestChaosChecks: each check finds nothing in a calm history, and finds
// what breaks its promise, about the delivery that broke it; what
// excuses a delivery (an erasure, a permanent answer, retention, a replay,
// a process window) is not counted.
func TestChaosChecks(t *testing.T) {
	at := func(f *chaosFacts, d time.Duration) time.Time { return f.start.Add(d) }
	for _, tc := range []struct {
		name   string
		check  string
		breaks func(f *chaosFacts)
		want   string // the delivery (or event, or detail) the violation names; "" none
		// also are checks that the break breaks too.
		also []string
	}{
		{"calm", "", func(*chaosFacts) {}, "", nil},
		{"lost", "nothing_lost", func(f *chaosFacts) {
			f.seen = slices.Delete(f.seen, 1, 2)
			f.seen[1].Seq = 2 // d2 was never sent: d3 comes next
		}, "d2", nil},
		{"lost but erased", "nothing_lost", func(f *chaosFacts) {
			f.erasures = []chaosErasure{{tenant: "chaos7_t0", began: at(f, 3500*time.Millisecond), answered: at(f, 3600*time.Millisecond), done: true}}
			f.seen = f.seen[:1]
		}, "", nil},
		{"lost but answered 400", "nothing_lost", func(f *chaosFacts) { f.seen[1].Status = 400 }, "", nil},
		{"lost but past retention", "nothing_lost", func(f *chaosFacts) {
			f.seen = slices.Delete(f.seen, 1, 2)
			f.seen[1].Seq = 2
			f.retention, f.restarts = 5*time.Second, []time.Time{at(f, 9*time.Second)}
		}, "", nil},
		{"pending", "every_delivery_ends", func(f *chaosFacts) { f.end.pending = []string{"d3"} }, "d3", nil},
		{"planned short", "plan_once", func(f *chaosFacts) {
			f.events[0].ids[0] = ""
			f.seen = f.seen[1:]
			f.seen[0].Seq, f.seen[1].Seq = 1, 2
		}, "ev1", nil},
		{"republished new", "plan_once", func(f *chaosFacts) {
			f.republishes = []republish{{tenant: "chaos7_t0", event: "ev2", at: at(f, 5*time.Second), why: "answered as a new event"}}
		}, "ev2", nil},
		{"other bytes", "same_id_same_bytes", func(f *chaosFacts) { f.seen[2].Body = 99 }, "d3", []string{"nothing_lost"}},
		{"unplanned id", "same_id_same_bytes", func(f *chaosFacts) {
			f.seen = append(f.seen, chaosSeen{Endpoint: "chaos7_t0_e0", Host: "h0", Delivery: "d9", Event: "ev1", Status: 200, Arrived: at(f, 9*time.Second)})
		}, "d9", nil},
		{"bad signature", "signed", func(f *chaosFacts) {
			f.seen = append(f.seen, chaosSeen{Endpoint: "chaos7_t0_e0", Host: "h0", Delivery: "d1", Event: "ev1", Body: 1, Status: 401, Arrived: at(f, time.Second)})
		}, "d1", nil},
		{"sent again", "answer_ends", func(f *chaosFacts) {
			again := f.seen[0]
			again.Arrived, again.Answered = at(f, 9*time.Second), at(f, 9*time.Second)
			f.seen = append(f.seen, again)
		}, "d1", nil},
		{"sent again by a replay", "answer_ends", func(f *chaosFacts) {
			again := f.seen[0]
			again.Arrived, again.Answered = at(f, 9*time.Second), at(f, 9*time.Second)
			f.seen = append(f.seen, again)
			f.resends = []resend{{delivery: "d1", at: at(f, 8*time.Second)}}
		}, "", nil},
		{"sent again across a kill", "answer_ends", func(f *chaosFacts) {
			again := f.seen[0]
			again.Arrived, again.Answered = at(f, 9*time.Second), at(f, 9*time.Second)
			f.seen = append(f.seen, again)
			f.windows = []window{{from: at(f, 5*time.Second), to: at(f, 6*time.Second), why: "kill"}}
		}, "", nil},
		{"sequence off", "sequence_numbering", func(f *chaosFacts) { f.seen[1].Seq = 1 }, "d2", nil},
		{"key out of order", "key_order", func(f *chaosFacts) {
			f.seen[2].Arrived, f.seen[2].Answered = f.seen[1].Arrived.Add(-time.Millisecond), f.seen[1].Arrived
			f.seen[1].Seq, f.seen[2].Seq = 3, 2 // numbered as sent
		}, "d3", nil},
		{"sequence skips", "sequence_numbering", func(f *chaosFacts) {
			f.seen[1].Seq, f.seen[2].Seq = 3, 4
		}, "d2", nil},
		{"sequence back", "sequence_numbering", func(f *chaosFacts) { f.seen[2].Seq = 1 }, "d3", nil},
		{"sequence of a repeat", "sequence_numbering", func(f *chaosFacts) {
			again := f.seen[0]
			again.Seq, again.Arrived, again.Answered = 7, at(f, 9*time.Second), at(f, 9*time.Second)
			f.seen = append(f.seen, again)
			f.resends = []resend{{delivery: "d1", at: at(f, 8*time.Second)}}
		}, "d1", nil},
		{"sequence jumps after an erasure", "sequence_numbering", func(f *chaosFacts) {
			f.seen[2].Seq = 40
			f.erasures = []chaosErasure{{tenant: "chaos7_t0", began: at(f, 2500*time.Millisecond), answered: at(f, 2600*time.Millisecond), done: true}}
			f.seen[2].Signed, f.seen[2].Arrived, f.seen[2].Answered = at(f, 5*time.Second), at(f, 5*time.Second), at(f, 5020*time.Millisecond)
		}, "", []string{"erased_not_sent"}},
		{"two in flight", "key_one_in_flight", func(f *chaosFacts) {
			f.seen[1].Arrived, f.seen[1].Answered = f.seen[0].Arrived.Add(5*time.Millisecond), f.seen[0].Answered.Add(time.Second)
		}, "d2", nil},
		{"secret to another host", "secret_header_hosts", func(f *chaosFacts) { f.seen[2].Host = "h1" }, "d3", nil},
		{"secret given for that host later", "secret_header_hosts", func(f *chaosFacts) {
			f.seen[2].Host = "h1"
			f.grants["chaos7_t0_e0"] = append(f.grants["chaos7_t0_e0"], headerGrant{value: "v1", host: "h1", at: at(f, time.Minute)})
		}, "d3", nil},
		{"secret given for that host", "secret_header_hosts", func(f *chaosFacts) {
			f.seen[2].Host = "h1"
			f.grants["chaos7_t0_e0"] = append(f.grants["chaos7_t0_e0"], headerGrant{value: "v1", host: "h1", at: at(f, time.Second)})
		}, "", nil},
		{"erased then sent", "erased_not_sent", func(f *chaosFacts) {
			f.erasures = []chaosErasure{{tenant: "chaos7_t0", began: at(f, 3050*time.Millisecond), answered: at(f, 3060*time.Millisecond), done: true}}
			f.seen[2].Signed, f.seen[2].Arrived, f.seen[2].Answered = at(f, 5*time.Second), at(f, 5*time.Second), at(f, 5020*time.Millisecond)
		}, "d3", nil},
		{"erased, a request that had left", "erased_not_sent", func(f *chaosFacts) {
			f.erasures = []chaosErasure{{tenant: "chaos7_t0", began: at(f, 3050*time.Millisecond), answered: at(f, 3060*time.Millisecond), done: true}}
			f.seen[2].Arrived, f.seen[2].Answered = at(f, 3500*time.Millisecond), at(f, 3520*time.Millisecond)
		}, "", nil},
		{"sent twice at once", "one_member_at_a_time", func(f *chaosFacts) {
			again := f.seen[1]
			again.Arrived = again.Arrived.Add(5 * time.Millisecond)
			f.seen = append(f.seen, again)
		}, "d2", []string{"key_one_in_flight", "answer_ends"}},
		{"sent twice at once, its only member stopped", "one_member_at_a_time", func(f *chaosFacts) {
			again := f.seen[1]
			again.Arrived = again.Arrived.Add(5 * time.Millisecond)
			f.seen = append(f.seen, again)
			f.single, f.windows = true, []window{{from: at(f, 2*time.Second), to: at(f, 3*time.Second), why: "sigterm"}}
		}, "", nil},
		{"sent twice at once, one of its members stopped", "one_member_at_a_time", func(f *chaosFacts) {
			again := f.seen[1]
			again.Arrived = again.Arrived.Add(5 * time.Millisecond)
			f.seen = append(f.seen, again)
			f.windows = []window{{from: at(f, 2*time.Second), to: at(f, 3*time.Second), why: "sigterm"}}
		}, "d2", []string{"answer_ends"}},
		{"sent twice at once, its member killed", "one_member_at_a_time", func(f *chaosFacts) {
			again := f.seen[1]
			again.Arrived = again.Arrived.Add(5 * time.Millisecond)
			f.seen = append(f.seen, again)
			f.windows = []window{{from: at(f, 2*time.Second), to: at(f, 3*time.Second), why: "kill"}}
		}, "", nil},
		{"erased then read", "erased_not_readable", func(f *chaosFacts) {
			f.probes = []chaosProbe{{what: "GetEvent", tenant: "chaos7_t0", event: "ev1", at: at(f, 5*time.Second), found: true}}
		}, "ev1", nil},
		{"read before the erasure", "erased_not_readable", func(f *chaosFacts) {
			f.probes = []chaosProbe{{what: "GetEvent", tenant: "chaos7_t0", event: "ev1", at: at(f, 5*time.Second), found: true, control: true}}
		}, "", nil},
		{"erased in a file", "erased_not_in_files", func(f *chaosFacts) { f.end.files = []fileHit{{file: "data/log/000001.sst", event: "ev1"}} }, "ev1", nil},
		{"reconcile", "reconcile_clean", func(f *chaosFacts) {
			f.end.reconcile = []discrepancy{{kind: "due_after_end", tenant: "chaos7_t0", event: "ev2", deliveries: []string{"d2"}, detail: "the due index holds it"}}
		}, "due_after_end", nil},
		{"reconcile: a publish raced a change of its endpoint", "reconcile_clean", func(f *chaosFacts) {
			f.end.reconcile = []discrepancy{{kind: "plan_config_version", tenant: "chaos7_t0", event: "ev2", deliveries: []string{"d2"}}}
			f.steps = append(f.steps, chaosStep{Action: chaosAction{Lane: laneConfig, Kind: actURL, Tenant: 0, Endpoint: 0, Node: -1},
				Began: at(f, 1500*time.Millisecond), Ended: at(f, 2500*time.Millisecond)})
		}, "", nil},
		{"reconcile: a publish after a change of its endpoint", "reconcile_clean", func(f *chaosFacts) {
			f.end.reconcile = []discrepancy{{kind: "plan_config_version", tenant: "chaos7_t0", event: "ev3", deliveries: []string{"d3"}}}
			f.steps = append(f.steps, chaosStep{Action: chaosAction{Lane: laneConfig, Kind: actURL, Tenant: 0, Endpoint: 0, Node: -1},
				Began: at(f, 1500*time.Millisecond), Ended: at(f, 2500*time.Millisecond)})
		}, "d3", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := chaosFixture()
			tc.breaks(f)
			f.index()
			for _, ch := range chaosChecks {
				vs := ch.run(f)
				if slices.Contains(tc.also, ch.name) {
					continue
				}
				if ch.name != tc.check || tc.want == "" {
					if len(vs) > 0 {
						t.Errorf("%s found %d: %v", ch.name, len(vs), vs)
					}
					continue
				}
				if len(vs) != 1 || !strings.Contains(vs[0].String(), tc.want) {
					t.Errorf("%s found %v, want one about %s", ch.name, vs, tc.want)
				}
			}
		})
	}
}

// TestChaosReport: a broken promise is printed with its check, the seed,
// what broke and a trace of the actions and messages behind it; the run
// fails naming the seed and the check.
func TestChaosReport(t *testing.T) {
	f := chaosFixture()
	f.seen[1].Seq = 1
	f.index()
	violations := map[string][]chaosViolation{}
	for _, ch := range chaosChecks {
		violations[ch.name] = ch.run(f)
	}
	s := chaosSchedule{Seed: 7, Duration: time.Minute, Nodes: 1}
	sum := f.summary(s, violations)
	var out bytes.Buffer
	f.print(&out, s, sum, violations)
	for _, want := range []string{
		"BROKEN sequence_numbering (1)",
		"seed 7: tenant chaos7_t0: endpoint chaos7_t0_e0: key k: event ev2: delivery d2: a new delivery of key k to chaos7_t0_e0 carried webhook-sequence 1 at +2.110s; the key's last was 1",
		"action #2 +0.000s publish",                           // the publish of ev2
		"chaos7_t0_e0 pushed to h0: d1 event ev1 key k seq 1", // the key's messages around it
		"chaos7_t0_e0 pushed to h0: d2 event ev2 key k seq 1",
		"replay with: hookbench run chaos --seed 7 --duration 1m0s --nodes 1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, out.String())
		}
	}
	err := errChaos(sum)
	if err == nil || !strings.Contains(err.Error(), "seed 7: sequence_numbering 1") || sum.Pass {
		t.Errorf("verdict: %v, pass %v", err, sum.Pass)
	}
}

// TestRunChaosFindsABrokenPromise: a node that sends every ordered
// delivery with a webhook-sequence one too high (skew-sequence=1) fails a
// short chaos run, which names the check, the seed and a key's first
// delivery carrying 2, with a trace of its messages.
func TestRunChaosFindsABrokenPromise(t *testing.T) {
	if testing.Short() {
		t.Skip("builds, runs, kills and rebuilds the hookline binary")
	}
	bin := hooklineBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"run", "chaos", "--seed", "5", "--duration", "20s", "--nodes", "1", "--drain", "60s", "--progress", "5s",
		"--hookline", bin, "--node-faults", "skew-sequence=1"}, &stdout, &stderr)
	t.Logf("%s\n%s", stderr.String(), stdout.String())
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "seed 5:") || !strings.Contains(err.Error(), "sequence_numbering") {
		t.Fatalf("the run's error: %v; want ErrFailed naming seed 5 and sequence_numbering", err)
	}
	out := stdout.String()
	if digest := newChaosSchedule(5, 20*time.Second, 1).Digest(); !strings.HasPrefix(out, "chaos: seed 5, 20s, one node") || !strings.Contains(out, "schedule "+digest) {
		t.Errorf("the report does not start with seed 5's schedule %s:\n%s", digest, out)
	}
	broken := regexp.MustCompile(`(?m)^  seed 5: tenant chaos5_t\d: endpoint chaos5_t\d_e\d: key L\dk\d+: event c5-\d+-\d+: delivery dlv_\w+: a new delivery of key L\dk\d+ to chaos5_t\d_e\d carried webhook-sequence 2 at \+[\d.]+s; the key's last was 0$`)
	traced := regexp.MustCompile(`(?m)^    \+[\d.]+s  chaos5_t\d_e\d (pushed to 127\.0\.0\.\d:\d+|pulled): dlv_\w+ event c5-\d+-\d+ key L\dk\d+ seq 2 `)
	if !strings.Contains(out, "BROKEN sequence_numbering") || !broken.MatchString(out) || !traced.MatchString(out) {
		t.Errorf("no violation of a key's first delivery carrying sequence 2, with a trace of its messages:\n%s", out)
	}
	if !strings.Contains(out, "replay with: hookbench run chaos --seed 5 --duration 20s --nodes 1") {
		t.Errorf("the report does not say how to replay the seed")
	}
}
