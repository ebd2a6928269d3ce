package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/client/outbox"
	"github.com/hookline/hookline/client/outbox/relay"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// These tests run the real binary's relay, outbox and client commands
// against a node in this process (clienttest) and an outbox on the
// PostgreSQL server at HOOKLINE_POSTGRES_URL.

// hookline runs the binary with args and returns its stdout and stderr.
func hookline(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), "HOOKLINE_TOKEN=", "HOOKLINE_ADDR=", "HOOKLINE_CA=", "HOOKLINE_OUTBOX_DB=", "HOOKLINE_OUTBOX_TABLE=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// relayProcess is a running `hookline relay`.
type relayProcess struct {
	cmd  *exec.Cmd
	logs *lockedWriter
	done chan error
}

// output is what the relay wrote on stderr so far.
func (p *relayProcess) output() string {
	p.logs.mu.Lock()
	defer p.logs.mu.Unlock()
	return p.logs.w.String()
}

func startRelay(t *testing.T, args ...string) *relayProcess {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"relay", "--log-level", "info"}, args...)...)
	cmd.Env = append(os.Environ(), "HOOKLINE_TOKEN=", "HOOKLINE_OUTBOX_DB=")
	p := &relayProcess{cmd: cmd, logs: &lockedWriter{w: &bytes.Buffer{}}, done: make(chan error, 1)}
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	// Until it says it started, a SIGTERM would find no handler yet and end
	// it as a signal would, not as a graceful stop.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.output(), `msg="relay started"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not start within 30 s:\n%s", p.output())
		}
		time.Sleep(10 * time.Millisecond) // a poll interval, not a wait for an event
	}
	return p
}

// lockedWriter serialises the writes of a child's output copier with
// reads of the buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestRelayKilled runs two `hookline relay` processes on one outbox and
// kills one of them with SIGKILL, in turn, again and again (a new one
// replacing it), while producers commit (and roll back) rows: every
// committed row becomes exactly one event, none is lost, no rolled back one
// is published.
func TestRelayKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ob := clienttest.NewOutbox(t, 8)
	n := clienttest.Start(t, clienttest.Options{})
	key := n.Tenant(t, "acme")
	relayArgs := []string{"--db", ob.DSN, "--table", string(ob.Table), "--addr", n.Addr, "--token", key, "--poll", "10ms", "--batch", "25"}

	// Producers: up to 1,000 transactions each of 1 to 3 rows, one in six
	// rolled back, until stopped.
	var mu sync.Mutex // guards committed and rolledBack
	var committed, rolledBack []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(p), 7))
			ctx := context.Background()
			for i := range 1000 {
				select {
				case <-stop:
					return
				default:
				}
				tx, err := ob.Pool.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var ids []string
				for k := range 1 + rnd.IntN(3) {
					id := fmt.Sprintf("p%d_%05d_%d", p, i, k)
					if _, err := outbox.Insert(ctx, tx, ob.Table, outbox.Event{ID: id, Type: "order.paid", Payload: fmt.Appendf(nil, `{"id":%q}`, id)}); err != nil {
						t.Error(err)
						_ = tx.Rollback(ctx)
						return
					}
					ids = append(ids, id)
				}
				if rnd.IntN(6) == 0 {
					_ = tx.Rollback(ctx)
					mu.Lock()
					rolledBack = append(rolledBack, ids...)
					mu.Unlock()
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				committed = append(committed, ids...)
				mu.Unlock()
			}
		})
	}

	// Two relays at all times; one of them, in turn, is killed and
	// replaced.
	const kills = 12
	rnd := rand.New(rand.NewPCG(3, 4))
	var logs strings.Builder
	relays := [2]*relayProcess{startRelay(t, relayArgs...), startRelay(t, relayArgs...)}
	for k := range kills {
		time.Sleep(time.Duration(150+rnd.IntN(400)) * time.Millisecond) // how long the relays live: the load, not a synchronisation
		r := relays[k%2]
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		fmt.Fprintf(&logs, "--- relay killed %d\n%s", k, r.output())
		relays[k%2] = startRelay(t, relayArgs...)
	}
	close(stop)
	wg.Wait()

	// The two left drain the outbox and stop gracefully.
	deadline := time.Now().Add(60 * time.Second)
	for waiting(t, ob) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the outbox did not drain: %d rows wait\n%s", waiting(t, ob), logs.String())
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, not a wait for an event
	}
	for _, r := range relays {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		if err := <-r.done; err != nil {
			t.Fatalf("relay after SIGTERM: %v\n%s", err, r.output())
		}
	}

	published := n.Published(t, "acme")
	for _, id := range committed {
		if published[id] != 1 {
			t.Errorf("committed %s published %d times", id, published[id])
		}
	}
	for _, id := range rolledBack {
		if published[id] != 0 {
			t.Errorf("rolled back %s published", id)
		}
	}
	if len(published) != len(committed) {
		t.Errorf("%d events published for %d committed rows", len(published), len(committed))
	}
	var dups int
	if err := ob.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+ob.Table.Ident()+` WHERE duplicate`).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	t.Logf("two relays, %d kills, %d rows committed, %d rolled back; %d rows published again after a kill (answered as duplicates)", kills, len(committed), len(rolledBack), dups)
	if t.Failed() {
		t.Logf("relay logs:\n%s", logs.String())
	}
}

func waiting(t *testing.T, ob *clienttest.Outbox) int {
	t.Helper()
	var n int
	if err := ob.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+ob.Table.Ident()+` WHERE relayed_at IS NULL AND refused_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRelayBacklogDrainsAfterHooklineReturns: with the node stopped, rows
// wait in the outbox (the relay backs off, nothing is dropped, the gauges
// show the backlog); when the node returns on the same address, the
// backlog drains, each row published once. The node runs as a process of
// its own: restarting one in this process would race, inside protoactor-go,
// with the relay's gRPC client on grpc's global logger.
func TestRelayBacklogDrainsAfterHooklineReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ob := clienttest.NewOutbox(t, 8)
	data := t.TempDir()
	n := startNode(t, data)
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	key := must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"}))
	hl, err := client.New(client.Config{Addr: n.grpcAddr, Token: key.GetApiKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	reg := prometheus.NewRegistry()
	w, err := relay.New(relay.Config{DB: ob.Pool, Table: ob.Table, Client: hl, PollEvery: 20 * time.Millisecond,
		BackoffCap: 200 * time.Millisecond, GaugeEvery: 50 * time.Millisecond, Registerer: reg, Logger: clienttest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	commit := func(id string) {
		if _, err := outbox.Insert(context.Background(), ob.Pool, ob.Table, outbox.Event{ID: id, Type: "order.paid", Payload: fmt.Appendf(nil, `{"id":%q}`, id)}); err != nil {
			t.Fatal(err)
		}
	}
	commit("before")
	waitFor(t, func() (int, bool) { n := waiting(t, ob); return n, n == 0 })

	addr := n.grpcAddr
	n.stop(t)
	ids := []string{"before"}
	for i := range 300 {
		id := fmt.Sprintf("while_down_%03d", i)
		commit(id)
		ids = append(ids, id)
	}
	waitFor(t, func() (relay.Stats, bool) { s := w.Stats(); return s, s.Failures >= 3 })
	waitFor(t, func() (float64, bool) {
		v := gathered(t, reg, "hookline_relay_rows_waiting")
		return v, v == 300 && gathered(t, reg, "hookline_relay_oldest_row_age_seconds") > 0
	})

	n = startNode(t, data, "--grpc-addr", addr)
	waitFor(t, func() (int, bool) { n := waiting(t, ob); return n, n == 0 })
	waitFor(t, func() (float64, bool) { v := gathered(t, reg, "hookline_relay_rows_waiting"); return v, v == 0 })
	if s := w.Stats(); s.Published != 301 || s.Duplicates != 0 {
		t.Fatalf("stats %+v, want 301 published", s)
	}
	n.stop(t)
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(data, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	published := clienttest.PublishedIn(t, l, "acme")
	for _, id := range ids {
		if published[id] != 1 {
			t.Errorf("%s published %d times", id, published[id])
		}
	}
	if len(published) != len(ids) {
		t.Errorf("%d events published for %d rows", len(published), len(ids))
	}
	t.Logf("stats %+v", w.Stats())
}

// gathered returns the value of the gauge name in reg; -1 when it has none.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestOutboxCommands: the table's SQL, its creation, and reconciliation
// before and after a repair, through the binary.
func TestOutboxCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ob := clienttest.NewOutbox(t, 4, true)
	n := clienttest.Start(t, clienttest.Options{})
	key := n.Tenant(t, "acme")
	db := []string{"--db", ob.DSN, "--table", string(ob.Table)}
	hl := []string{"--addr", n.Addr, "--token", key}

	t.Run("schema", func(t *testing.T) {
		out, _, err := hookline(t, "outbox", "schema", "--table", "billing.outbox")
		if err != nil || !strings.Contains(out, `CREATE TABLE IF NOT EXISTS "billing"."outbox"`) {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, errOut, err := hookline(t, "outbox", "schema", "--table", "x; DROP TABLE y"); err == nil || !strings.Contains(errOut, "table name") {
			t.Fatalf("a bad table name: %v %s", err, errOut)
		}
	})
	t.Run("init", func(t *testing.T) {
		for range 2 {
			if out, errOut, err := hookline(t, append([]string{"outbox", "init"}, db...)...); err != nil || !strings.Contains(out, "ready") {
				t.Fatalf("%v\n%s%s", err, out, errOut)
			}
		}
		if _, errOut, err := hookline(t, "outbox", "init"); err == nil || !strings.Contains(errOut, "--db is missing") {
			t.Fatalf("no --db: %v %s", err, errOut)
		}
	})
	ctx := context.Background()
	for _, id := range []string{"o_1", "o_2", "o_3"} {
		if _, err := outbox.Insert(ctx, ob.Pool, ob.Table, outbox.Event{ID: id, Type: "order.paid", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("reconcile finds the rows not relayed", func(t *testing.T) {
		out, errOut, err := hookline(t, append(append([]string{"outbox", "reconcile", "--since", "1h"}, db...), hl...)...)
		if err == nil || !strings.Contains(errOut, "3 rows missing") || !strings.Contains(out, "waiting     3") || !strings.Contains(out, "o_1 o_2 o_3") {
			t.Fatalf("%v\n%s%s", err, out, errOut)
		}
	})
	t.Run("repair", func(t *testing.T) {
		out, errOut, err := hookline(t, append(append([]string{"outbox", "reconcile", "--since", "1h", "--repair"}, db...), hl...)...)
		if err != nil || !strings.Contains(out, "repaired    3") {
			t.Fatalf("%v\n%s%s", err, out, errOut)
		}
		out, errOut, err = hookline(t, append(append([]string{"outbox", "reconcile", "--since", "1h"}, db...), hl...)...)
		if err != nil || !strings.Contains(out, "accepted    3") {
			t.Fatalf("after the repair: %v\n%s%s", err, out, errOut)
		}
	})
}

// TestClientCommands drives a few client commands through the binary, and
// checks that the usage lists every command.
func TestClientCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	n := clienttest.Start(t, clienttest.Options{})
	admin := []string{"--addr", n.Addr, "--token", clienttest.AdminToken}

	t.Run("usage", func(t *testing.T) {
		out, _, err := hookline(t, "help")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"serve", "dev", "relay", "outbox reconcile", "tenants create", "keys revoke", "endpoints recover", "endpoints recovery",
			"events publish", "deliveries list", "deliveries get", "deliveries replay", "--ca", "--plaintext"} {
			if !strings.Contains(out, " "+c+" ") {
				t.Errorf("usage does not list %q", c)
			}
		}
	})
	if _, errOut, err := hookline(t, append([]string{"tenants", "create", "--id", "acme", "--name", "Acme"}, admin...)...); err != nil {
		t.Fatalf("tenants create: %v %s", err, errOut)
	}
	out, errOut, err := hookline(t, append([]string{"--json", "keys", "issue", "--tenant", "acme"}, admin...)...)
	if err != nil {
		t.Fatalf("keys issue: %v %s", err, errOut)
	}
	var key struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(out), &key); err != nil || key.APIKey == "" {
		t.Fatalf("keys issue --json: %v %s", err, out)
	}
	tenant := []string{"--addr", n.Addr, "--token", key.APIKey}
	if _, errOut, err := hookline(t, append([]string{"endpoints", "create", "--id", "ep_1", "--url", "http://127.0.0.1:9/in", "--types", "order.paid"}, tenant...)...); err != nil {
		t.Fatalf("endpoints create: %v %s", err, errOut)
	}
	out, errOut, err = hookline(t, append([]string{"events", "publish", "--id", "o_1", "--type", "order.paid", "--data", `{"a":1}`}, tenant...)...)
	if err != nil || !strings.Contains(out, "event o_1") || !strings.Contains(out, "endpoint ep_1") {
		t.Fatalf("events publish: %v\n%s%s", err, out, errOut)
	}
	out, _, err = hookline(t, append([]string{"events", "publish", "--id", "o_1", "--type", "order.paid", "--data", `{"a":1}`}, tenant...)...)
	if err != nil || !strings.Contains(out, "already accepted") {
		t.Fatalf("events publish again: %v\n%s", err, out)
	}
	_, errOut, err = hookline(t, append([]string{"events", "publish", "--id", "o_1", "--type", "order.paid", "--data", `{"a":2}`}, tenant...)...)
	if err == nil || !strings.Contains(errOut, "already exists") {
		t.Fatalf("events publish with another payload: %v\n%s", err, errOut)
	}
	_, errOut, err = hookline(t, append([]string{"endpoints", "list", "--ca", "/nonexistent/ca.pem"}, tenant...)...)
	if err == nil || !strings.Contains(errOut, "CA file") {
		t.Fatalf("--ca with a missing file: %v\n%s", err, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, err = hookline(t, append([]string{"deliveries", "list"}, tenant...)...)
		if err != nil {
			t.Fatalf("deliveries list: %v %s", err, errOut)
		}
		if strings.Contains(out, "ep_1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries list never showed the delivery:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, not a wait for an event
	}
}
