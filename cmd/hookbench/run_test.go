package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hookline/hookline/internal/brokers"
)

func TestPercentiles(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want []float64
	}{
		{"empty", nil, []float64{0, 0, 0}},
		{"one", ms(7), []float64{7, 7, 7}},
		{"unsorted", ms(5, 1, 4, 2, 3), []float64{3, 5, 5}},
		{"hundred", ms(func() []int {
			var v []int
			for i := 100; i >= 1; i-- {
				v = append(v, i)
			}
			return v
		}()...), []float64{50, 99, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, percentiles(tc.in, 0.5, 0.99, 1)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// lastJSON checks that the output ends with one JSON object carrying every
// summary key, and decodes it.
func lastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("the last line is not a JSON object: %v\n%s", err, out)
	}
	for _, k := range summaryKeys {
		if _, ok := m[k]; !ok {
			t.Errorf("the JSON line has no %q: %s", k, lines[len(lines)-1])
		}
	}
	return m
}

func TestSummaryPrint(t *testing.T) {
	s := Summary{Scenario: "throughput", Expected: 10, Planned: 10, Deliveries: 10, DeliveriesPerSec: 100, RawPerSec: 400, RatioToRaw: 0.25,
		Extra: map[string]float64{"kills": 5}, Config: map[string]any{"duration": "2s"}, Notes: []string{"a note"}}
	s.judge()
	var out bytes.Buffer
	if err := s.Print(&out); err != nil {
		t.Fatal(err)
	}
	m := lastJSON(t, out.String())
	if m["scenario"] != "throughput" || m["ratio_to_raw"] != 0.25 || m["lost"] != 0.0 || m["pass"] != true {
		t.Errorf("JSON line: %v", m)
	}
	if cfg := m["config"].(map[string]any); cfg["duration"] != "2s" {
		t.Errorf("config: %v", cfg)
	}
	if !strings.Contains(out.String(), "raw loop") || !strings.Contains(out.String(), "kills") || !strings.Contains(out.String(), "config duration") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestParseRun(t *testing.T) {
	var stderr bytes.Buffer
	c, err := parseRun([]string{"throughput", "--duration", "5s"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if c.Duration != 5*time.Second || c.Tenants != 10 || c.Endpoints != 10 || c.Fanout != 4 || c.RawDuration != 10*time.Second || c.Publishers != 8 {
		t.Errorf("throughput defaults: %+v", c)
	}
	if c, err = parseRun([]string{"ordering"}, &stderr); err != nil || c.OrderingKeys != 1000 {
		t.Errorf("ordering: %d keys, %v; want the scenario's 1000", c.OrderingKeys, err)
	}
	if _, err = parseRun([]string{"crash", "--ordering-keys", "100", "--batch", "50"}, &stderr); err == nil || !strings.Contains(err.Error(), "--ordering-keys") {
		t.Errorf("100 keys for 8 publishers of 50-event batches: %v, want a refusal naming --ordering-keys", err)
	}
	c, err = parseRun([]string{"--rate", "20", "crash"}, &stderr)
	if err != nil || c.Scenario != "crash" || c.Rate != 20 || c.Kills != 6 || c.Duration != time.Minute {
		t.Errorf("crash: %+v, %v", c, err)
	}
	if c, err = parseRun([]string{"crash", "--ordering-keys", "1000", "--fail-key", "30s"}, &stderr); err != nil || c.Drain != 30*time.Second+failKeyDrain {
		t.Errorf("--fail-key 30s: drain %v, %v; want the failing time plus %v", c.Drain, err, failKeyDrain)
	}
	if c, err = parseRun([]string{"crash", "--ordering-keys", "1000", "--fail-key", "30s", "--drain", "10s"}, &stderr); err != nil || c.Drain != 10*time.Second {
		t.Errorf("--fail-key with --drain 10s: drain %v, %v; want the one given", c.Drain, err)
	}
	if c, err = parseRun([]string{"throughput", "--raw-duration", "-1s"}, &stderr); err != nil || c.RawDuration != 0 {
		t.Errorf("--raw-duration -1s: %v, %v", c.RawDuration, err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no scenario", nil, "name a scenario"},
		{"unknown", []string{"nope"}, "unknown scenario"},
		{"big batch", []string{"latency", "--batch", "500"}, "at most 100"},
		{"fanout", []string{"latency", "--fanout", "11"}, "--fanout"},
		{"crash on a given node", []string{"crash", "--node", "127.0.0.1:7070", "--token", "x"}, "drop --node"},
		{"few kills", []string{"crash", "--kills", "2"}, "at least 5"},
		{"node without token", []string{"latency", "--node", "127.0.0.1:7070", "--token", ""}, "--token"},
		{"extra argument", []string{"latency", "more"}, "unexpected argument"},
		{"unknown node fault", []string{"throughput", "--node-faults", "plan-long=3"}, "--node-faults"},
		{"node faults on a given node", []string{"throughput", "--node", "127.0.0.1:7070", "--token", "x", "--node-faults", "plan-short=10"}, "drop --node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRun(tc.args, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestRawCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"raw", "--duration", "200ms", "--workers", "2"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var res RawResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Succeeded == 0 {
		t.Fatalf("raw printed %q (%v)", stdout.String(), err)
	}
}

var (
	nodeOnce sync.Once
	nodeBin  string
	nodeErr  error
)

// hooklineBinary builds cmd/hookline once per test run.
func hooklineBinary(t *testing.T) string {
	t.Helper()
	nodeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hookbench-test")
		if err != nil {
			nodeErr = err
			return
		}
		nodeBin, nodeErr = BuildNode(context.Background(), dir)
	})
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
	return nodeBin
}

// runBench runs `hookbench run` with args against the real node and
// returns the last line's JSON and the run's error (ErrFailed when a check
// failed). Nothing delivered fails the test: the harness must never pass,
// nor skip, a run that delivered nothing.
func runBench(t *testing.T, args ...string) (map[string]any, error) {
	t.Helper()
	bin := hooklineBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args = append([]string{"run"}, append(args, "--hookline", bin, "--first-delivery", "15s", "--progress", "1s")...)
	err := run(ctx, args, &stdout, &stderr)
	t.Logf("%s\n%s", stderr.String(), stdout.String())
	if errors.Is(err, ErrNoDelivery) || (err != nil && !errors.Is(err, ErrFailed)) {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	return lastJSON(t, stdout.String()), err
}

// checksZero fails the test unless every check of the summary is 0, it
// passed, and something was delivered.
func checksZero(t *testing.T, m map[string]any) {
	t.Helper()
	for _, k := range []string{"lost", "planned_mismatch", "unplanned", "bad_signature", "body_mismatch", "duplicates_unexplained"} {
		if m[k] != 0.0 {
			t.Errorf("%s = %v, want 0", k, m[k])
		}
	}
	if m["deliveries"].(float64) == 0 || m["deliveries"] != m["expected"] || m["pass"] != true {
		t.Errorf("deliveries %v of %v expected, pass %v", m["deliveries"], m["expected"], m["pass"])
	}
}

// throughputArgs are a short throughput run: two tenants, four endpoints
// each, fan-out 2, two seconds as fast as accepted, no raw loop.
var throughputArgs = []string{"throughput", "--duration", "2s", "--tenants", "2", "--endpoints", "4", "--fanout", "2",
	"--raw-duration", "-1s", "--drain", "30s"}

func TestRunThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the hookline binary")
	}
	m, err := runBench(t, "throughput", "--duration", "2s", "--tenants", "2", "--endpoints", "4", "--fanout", "2",
		"--raw-duration", "500ms", "--raw-workers", "4", "--drain", "30s")
	if err != nil {
		t.Errorf("the run failed: %v", err)
	}
	checksZero(t, m)
	if m["raw_per_sec"].(float64) <= 0 || m["ratio_to_raw"].(float64) <= 0 || m["node_pending"] != 0.0 || m["node_succeeded"] != m["deliveries"] {
		t.Errorf("summary: %v", m)
	}
	if cfg := m["config"].(map[string]any); cfg["duration"] != "2s" || cfg["fanout"] != 2.0 {
		t.Errorf("config: %v", cfg)
	}
}

// TestRunThroughputFaults shows that the harness can fail: a node that
// silently plans one delivery in 50 too few, or changes one byte of one
// attempt's body in 50, fails its run and names the counter.
func TestRunThroughputFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the hookline binary")
	}
	for _, tc := range []struct {
		faults string
		want   []string // counters that must be above 0
	}{
		{"plan-short=50", []string{"planned_mismatch", "lost"}},
		{"corrupt-body=50", []string{"body_mismatch"}},
	} {
		t.Run(tc.faults, func(t *testing.T) {
			m, err := runBench(t, append(slices.Clone(throughputArgs), "--node-faults", tc.faults)...)
			if !errors.Is(err, ErrFailed) {
				t.Errorf("the run did not fail: %v", err)
			}
			if m["pass"] != false {
				t.Errorf("pass = %v", m["pass"])
			}
			for _, k := range tc.want {
				if m[k].(float64) <= 0 {
					t.Errorf("%s = %v, want more than 0", k, m[k])
				}
				if err == nil || !strings.Contains(err.Error(), k) {
					t.Errorf("the error does not name %s: %v", k, err)
				}
			}
			if m["deliveries"].(float64) == 0 {
				t.Error("nothing delivered: the fault was not the only failure")
			}
		})
	}
}

func TestRunCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds, runs and kills the hookline binary")
	}
	m, err := runBench(t, "crash", "--duration", "12s", "--kills", "5", "--tenants", "1", "--endpoints", "4", "--fanout", "2",
		"--rate", "40", "--drain", "30s")
	if err != nil {
		t.Errorf("the run failed: %v", err)
	}
	checksZero(t, m)
	if extra := m["extra"].(map[string]any); extra["kills"] != 5.0 {
		t.Errorf("kills: %v", extra)
	}
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), make([]byte, 100), 0o600)
	os.MkdirAll(filepath.Join(dir, "b"), 0o700)
	os.WriteFile(filepath.Join(dir, "b", "c"), make([]byte, 23), 0o600)
	os.WriteFile(filepath.Join(dir, "b", "000007.sst"), make([]byte, 7), 0o600)
	if n, tables, err := dirSizes(dir); err != nil || n != 130 || tables != 7 {
		t.Fatalf("dirSizes = %d, %d, %v; want 130, 7", n, tables, err)
	}
	// The kernel counts CPU in ticks: work until one is counted.
	var u Usage
	var err error
	for deadline, x := time.Now().Add(10*time.Second), 0; time.Now().Before(deadline); {
		if u, err = procUsage(os.Getpid()); err != nil || u.CPU > 0 {
			break
		}
		for i := range 1_000_000 {
			x ^= i * i
		}
		_ = x
	}
	if err != nil || u.CPU <= 0 || u.PeakRSS <= 0 {
		t.Fatalf("procUsage(self) = %+v, %v", u, err)
	}
}

// runAcceptance runs the acceptance run with args and returns its summary
// and error.
func runAcceptance(t *testing.T, timeout time.Duration, args ...string) (AcceptanceSummary, error) {
	t.Helper()
	bin := hooklineBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, append([]string{"run", "acceptance", "--hookline", bin}, args...), &stdout, &stderr)
	t.Logf("%s\n%s", stderr.String(), stdout.String())
	if err != nil && !errors.Is(err, ErrFailed) {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	var sum AcceptanceSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatalf("the last line is not the JSON summary: %v", err)
	}
	return sum, err
}

// TestRunAcceptance is the acceptance run's short variant, on one node:
// every fault, a few seconds each; each must pass its criteria (the
// healthy tenants' p99 is reported, not judged, over so few samples).
func TestRunAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds, runs, faults and kills the hookline binary")
	}
	sum, err := runAcceptance(t, 6*time.Minute, "--duration", "4s", "--rate", "20", "--storm", "3s",
		"--hang-endpoints", "20", "--drain", "60s", "--progress", "5s")
	if err != nil {
		t.Errorf("the run failed: %v", err)
	}
	var names []string
	for _, f := range sum.Faults {
		names = append(names, f.Name)
		if !f.Pass {
			t.Errorf("fault %s failed: %v", f.Name, f.Why)
		}
		if f.Planned == 0 || f.Planned != f.Delivered+f.Failed+f.Pending {
			t.Errorf("fault %s: durable counts do not add up: %+v", f.Name, f)
		}
		if f.Expected == 0 || f.Lost != 0 || f.PlannedMismatch != 0 || f.Unplanned != 0 || f.BadSignature != 0 || f.BodyMismatch != 0 || f.Unexplained != 0 {
			t.Errorf("fault %s: the ledger's checks: %+v", f.Name, f)
		}
	}
	want := []string{"baseline", "producer-twice", "fanout-midway", "duplicate-due", "kill-after-2xx", "retry-storm", "hanging-tenant", "slow-fsync", "unknown-outcome"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("faults run (-want +got):\n%s", diff)
	}
	if !sum.Pass {
		t.Error("the acceptance run did not pass")
	}
}

// TestRunAcceptanceFails: the acceptance run fails, and names the
// counter, when the node plans too little or sends other bytes (the
// baseline alone, on a node with the fault for the whole run).
func TestRunAcceptanceFails(t *testing.T) {
	if testing.Short() {
		t.Skip("builds, runs and faults the hookline binary")
	}
	for _, tc := range []struct {
		faults string
		count  func(FaultResult) int64
		name   string
	}{
		{"plan-short=40", func(f FaultResult) int64 { return min(f.PlannedMismatch, f.Lost) }, "planned_mismatch"},
		{"corrupt-body=40", func(f FaultResult) int64 { return f.BodyMismatch }, "body_mismatch"},
	} {
		t.Run(tc.faults, func(t *testing.T) {
			sum, err := runAcceptance(t, 2*time.Minute, "--only", "baseline", "--node-faults", tc.faults,
				"--duration", "3s", "--rate", "20", "--drain", "20s", "--progress", "5s")
			if !errors.Is(err, ErrFailed) || sum.Pass {
				t.Fatalf("the run did not fail: %v", err)
			}
			base := sum.Faults[0]
			if tc.count(base) <= 0 || base.Pass || !slices.ContainsFunc(base.Why, func(w string) bool { return strings.HasPrefix(w, tc.name) }) {
				t.Errorf("baseline: %+v", base)
			}
		})
	}
}

// TestRunBrokers runs the brokers scenario small: real nats-server and
// RabbitMQ, the node killed twice in each broker phase, nothing lost by
// what the brokers hold, and no message stored twice in the NATS stream.
func TestRunBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds, runs and kills the hookline binary, starts nats-server and RabbitMQ")
	}
	for _, kind := range []brokers.Kind{brokers.NATS, brokers.RabbitMQ} {
		if _, err := brokers.Find(kind); err != nil && os.Getenv("CI") == "" {
			t.Skip(err)
		}
	}
	m, err := runBench(t, "brokers", "--duration", "2s", "--tenants", "1", "--endpoints", "4", "--fanout", "2",
		"--rate", "100", "--broker-deliveries", "1000", "--drain", "60s")
	if err != nil {
		t.Errorf("the run failed: %v", err)
	}
	checksZero(t, m)
	extra := m["extra"].(map[string]any)
	for _, k := range []string{"nats_kills_deliveries", "rabbitmq_kills_deliveries"} {
		if extra[k] != 1000.0 {
			t.Errorf("%s = %v, want 1000", k, extra[k])
		}
	}
	if extra["nats_kills_kills"] != 2.0 || extra["rabbitmq_kills_kills"] != 2.0 || extra["nats_kills_duplicates"] != 0.0 {
		t.Errorf("kills or NATS repeats: %v", extra)
	}
	for _, k := range []string{"nats_to_http", "rabbitmq_to_http"} {
		if v, _ := extra[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want a ratio", k, extra[k])
		}
	}
}

// TestRunSealing: the sealing scenario restarts its node with and
// without --plain-payloads and measures both; every delivery of both
// phases arrives with its bytes.
func TestRunSealing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the hookline binary")
	}
	m, err := runBench(t, "sealing", "--duration", "2s", "--tenants", "1", "--endpoints", "4", "--fanout", "2", "--drain", "30s")
	if err != nil {
		t.Errorf("the run failed: %v", err)
	}
	checksZero(t, m)
	extra := m["extra"].(map[string]any)
	for _, k := range []string{"plain_deliveries_per_sec", "sealed_deliveries_per_sec", "sealed_to_plain_throughput", "sealed_to_plain_cpu"} {
		if v, _ := extra[k].(float64); v <= 0 {
			t.Errorf("extra %s = %v, want > 0", k, extra[k])
		}
	}
}
