package relay_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/client/outbox"
	"github.com/hookline/hookline/client/outbox/relay"
)

// These tests run a real node in this process and an outbox on the
// PostgreSQL server at HOOKLINE_POSTGRES_URL; one at a time.

// env is a node, a tenant's client and an outbox table.
type env struct {
	node *clienttest.Node
	ob   *clienttest.Outbox
	key  string
	c    *client.Client
}

func newEnv(t testing.TB, maxConns int) *env {
	t.Helper()
	ob := clienttest.NewOutbox(t, maxConns) // skips without PostgreSQL, before a node starts
	n := clienttest.Start(t, clienttest.Options{})
	key := n.Tenant(t, "acme")
	return &env{node: n, ob: ob, key: key, c: n.Client(t, key)}
}

// worker returns a Worker on the env's outbox and client, polling fast;
// cfg sets the rest.
func (e *env) worker(t *testing.T, cfg relay.Config) *relay.Worker {
	t.Helper()
	cfg.DB, cfg.Table = e.ob.Pool, e.ob.Table
	if cfg.Client == nil {
		cfg.Client = e.c
	}
	if cfg.PollEvery == 0 {
		cfg.PollEvery = 20 * time.Millisecond
	}
	if cfg.BackoffCap == 0 {
		cfg.BackoffCap = 200 * time.Millisecond
	}
	cfg.Logger = clienttest.Logger()
	w, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// run runs w until the returned function is called, which waits for it.
func run(t *testing.T, w *relay.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("worker did not stop within 60 s")
		}
	}
	t.Cleanup(stop)
	return stop
}

// payload is the payload of event id in these tests.
func payload(id string) []byte { return fmt.Appendf(nil, `{"event":%q}`, id) }

// insert writes event id in tx.
func (e *env) insert(t *testing.T, ctx context.Context, tx pgx.Tx, id string) {
	t.Helper()
	if _, err := outbox.Insert(ctx, tx, e.ob.Table, outbox.Event{ID: id, Type: "order.paid", Payload: payload(id)}); err != nil {
		t.Fatal(err)
	}
}

// commitOne writes and commits event id in a transaction of its own.
func (e *env) commitOne(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.ob.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.insert(t, ctx, tx, id)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// count runs a count query on the outbox; where filters its rows.
func (e *env) count(t *testing.T, where string) int {
	t.Helper()
	var n int
	if err := e.ob.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+e.ob.Table.Ident()+` WHERE `+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds, for at most d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for an event
	}
}

// waitDrained waits until no row waits in the outbox.
func (e *env) waitDrained(t *testing.T, d time.Duration) {
	t.Helper()
	waitFor(t, d, "the outbox drains", func() bool { return e.count(t, "relayed_at IS NULL AND refused_at IS NULL") == 0 })
}

// checkExactlyOnce checks that Hookline accepted every committed id once,
// with its payload, and none of the rolled back ones.
func (e *env) checkExactlyOnce(t *testing.T, committed, rolledBack []string) {
	t.Helper()
	published := e.node.Published(t, "acme")
	for _, id := range committed {
		if n := published[id]; n != 1 {
			t.Errorf("committed %s: published %d times in the log, want 1", id, n)
		}
	}
	for _, id := range rolledBack {
		if n := published[id]; n != 0 {
			t.Errorf("rolled back %s: published %d times", id, n)
		}
	}
	if len(published) != len(committed) {
		t.Errorf("%d events in the log, %d committed rows", len(published), len(committed))
	}
	found, missing, err := e.c.LookupEvents(context.Background(), "", committed)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("missing in Hookline: %v", missing)
	}
	for _, ev := range found {
		if sum := sha256.Sum256(payload(ev.GetEventId())); !bytes.Equal(ev.GetPayloadSha256(), sum[:]) {
			t.Errorf("%s accepted with another payload", ev.GetEventId())
		}
	}
}

// TestLateCommitIsNotSkipped: a row that commits after a row inserted
// after it (a lower seq, committed later) is relayed all the same.
func TestLateCommitIsNotSkipped(t *testing.T) {
	e := newEnv(t, 4)
	w := e.worker(t, relay.Config{})
	ctx := context.Background()

	late, err := e.ob.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)
	e.insert(t, ctx, late, "late") // takes the lower seq, commits last
	e.commitOne(t, "early")

	if n, err := w.Batch(ctx); err != nil || n != 1 {
		t.Fatalf("first batch: %d rows, %v; want early alone", n, err)
	}
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Batch(ctx); err != nil || n != 1 {
		t.Fatalf("second batch: %d rows, %v; want late", n, err)
	}
	var seqLate, seqEarly int64
	if err := e.ob.Pool.QueryRow(ctx, `SELECT (SELECT seq FROM `+e.ob.Table.Ident()+` WHERE event_id = 'late'), (SELECT seq FROM `+e.ob.Table.Ident()+` WHERE event_id = 'early')`).Scan(&seqLate, &seqEarly); err != nil {
		t.Fatal(err)
	}
	if seqLate >= seqEarly {
		t.Fatalf("late has seq %d, early %d: the test did not commit a lower seq later", seqLate, seqEarly)
	}
	e.checkExactlyOnce(t, []string{"early", "late"}, nil)
	if s := w.Stats(); s.Published != 2 || s.Duplicates != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestConcurrentProducers: waves of concurrent producer transactions,
// inserting first and then committing in a shuffled order (so seqs commit
// out of order), a fifth of them rolled back, while a Worker relays: every
// committed row becomes one event, no rolled back one does.
func TestConcurrentProducers(t *testing.T) {
	const producers, waves = 12, 25
	e := newEnv(t, producers+8)
	w := e.worker(t, relay.Config{BatchSize: 20})
	run(t, w)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))

	var committed, rolledBack []string
	for wave := range waves {
		type producer struct {
			tx  pgx.Tx
			ids []string
		}
		ps := make([]producer, producers)
		var wg sync.WaitGroup
		for p := range ps {
			tx, err := e.ob.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ps[p].tx = tx
			for k := range 1 + p%3 {
				ps[p].ids = append(ps[p].ids, fmt.Sprintf("w%02d_p%02d_%d", wave, p, k))
			}
			wg.Go(func() {
				for _, id := range ps[p].ids {
					if _, err := outbox.Insert(ctx, tx, e.ob.Table, outbox.Event{ID: id, Type: "order.paid", Payload: payload(id)}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		for _, p := range rnd.Perm(producers) {
			if rnd.IntN(5) == 0 {
				if err := ps[p].tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				rolledBack = append(rolledBack, ps[p].ids...)
				continue
			}
			if err := ps[p].tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			committed = append(committed, ps[p].ids...)
		}
	}
	e.waitDrained(t, 60*time.Second)
	e.checkExactlyOnce(t, committed, rolledBack)
	if s := w.Stats(); s.Published != int64(len(committed)) || s.Duplicates != 0 || s.Refused != 0 {
		t.Fatalf("stats %+v, want %d published and nothing else", s, len(committed))
	}
	if n := e.count(t, "true"); n != len(committed) {
		t.Fatalf("%d rows in the outbox, %d committed", n, len(committed))
	}
	t.Logf("%d rows committed out of order, %d rolled back", len(committed), len(rolledBack))
}

// TestTwoWorkers: two Workers on one outbox while producers insert: every
// row is published once, by one of them, and both do their share.
func TestTwoWorkers(t *testing.T) {
	e := newEnv(t, 16)
	a := e.worker(t, relay.Config{BatchSize: 10})
	b := e.worker(t, relay.Config{BatchSize: 10})
	run(t, a)
	run(t, b)
	var ids []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := range 150 {
				id := fmt.Sprintf("p%d_%03d", p, i)
				e.commitOne(t, id)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	e.waitDrained(t, 60*time.Second)
	e.checkExactlyOnce(t, ids, nil)
	sa, sb := a.Stats(), b.Stats()
	if sa.Published+sb.Published != int64(len(ids)) || sa.Duplicates+sb.Duplicates != 0 {
		t.Fatalf("a %+v, b %+v: want %d published between them, no duplicate", sa, sb, len(ids))
	}
	if sa.Published == 0 || sb.Published == 0 {
		t.Fatalf("a %+v, b %+v: one worker did all the work", sa, sb)
	}
	t.Logf("worker a published %d, worker b %d", sa.Published, sb.Published)
}

// blackHole accepts connections, opens HTTP/2 on them (an empty SETTINGS
// frame, the server's preface) and never answers a request: a Hookline that
// hangs. Without the preface the client's connect timeout, not the relay's
// publish timeout, would end the publish. connected is closed at the first
// connection.
func blackHole(t *testing.T) (addr string, connected <-chan struct{}) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	ch := make(chan struct{})
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			// length 0, type SETTINGS (4), no flags, stream 0
			if _, err := c.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}); err != nil {
				c.Close()
				continue
			}
			go io.Copy(io.Discard, c) // read what the client sends, answer nothing
			if conns = append(conns, c); len(conns) == 1 {
				close(ch)
			}
		}
	}()
	return lis.Addr().String(), ch
}

// TestStalledWorkerDoesNotStallOthers: a Worker whose Hookline hangs holds
// only the rows of its batch, and only until its publish times out; another
// Worker relays everything else meanwhile, and those rows after.
func TestStalledWorkerDoesNotStallOthers(t *testing.T) {
	e := newEnv(t, 8)
	hole, connected := blackHole(t)
	stuckClient, err := client.New(client.Config{Addr: hole, Token: e.key, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer stuckClient.Close()
	const timeout = 5 * time.Second
	stuck := e.worker(t, relay.Config{Client: stuckClient, PublishTimeout: timeout})
	healthy := e.worker(t, relay.Config{})
	for i := range 10 {
		e.commitOne(t, fmt.Sprintf("first_%d", i))
	}
	stuckDone := make(chan error, 1)
	start := time.Now()
	go func() { _, err := stuck.Batch(context.Background()); stuckDone <- err }()
	select {
	case <-connected: // it holds its rows, and publishes into the hole
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck worker never tried to publish")
	}
	for i := range 10 {
		e.commitOne(t, fmt.Sprintf("second_%d", i))
	}
	if n, err := healthy.Batch(context.Background()); err != nil || n != 10 {
		t.Fatalf("healthy batch: %d rows, %v; want the 10 rows the stuck worker does not hold", n, err)
	}
	if waited := time.Since(start); waited >= timeout {
		t.Fatalf("the healthy worker waited %v for the stuck one", waited)
	}
	if err := <-stuckDone; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stuck batch: %v, want its publish timeout", err)
	}
	if n, err := healthy.Batch(context.Background()); err != nil || n != 10 {
		t.Fatalf("healthy batch after the timeout: %d rows, %v; want the 10 released", n, err)
	}
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("first_%d", i), fmt.Sprintf("second_%d", i))
	}
	e.checkExactlyOnce(t, ids, nil)
}

// metric returns the value of one series of reg: name, with the label
// outcome when it is not empty; -1 when there is none.
func metric(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := outcome == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == "outcome" && l.GetValue() == outcome
			}
			if match {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// TestRefusals: a row Hookline refuses for good (an invalid type; an id
// accepted before with another payload; a tenant the relay's key may not
// publish for) is marked refused, with the reason, and does not hold up
// the rows of its batch.
func TestRefusals(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	if _, err := e.c.Publish(ctx, client.Event{ID: "taken", Type: "order.paid", Payload: []byte(`{"other":"bytes"}`)}); err != nil {
		t.Fatal(err)
	}
	e.commitOne(t, "good_1")
	e.commitOne(t, "taken")
	if _, err := e.ob.Pool.Exec(ctx, `INSERT INTO `+e.ob.Table.Ident()+` (event_id, event_type, payload) VALUES ('bad_type', 'not a type!', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Insert(ctx, e.ob.Pool, e.ob.Table, outbox.Event{TenantID: "globex", ID: "not_ours", Type: "order.paid", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	e.commitOne(t, "good_2")
	reg := prometheus.NewRegistry()
	w := e.worker(t, relay.Config{Registerer: reg})
	if n, err := w.Batch(ctx); n != 5 || err != nil {
		t.Fatalf("batch: %d rows, %v", n, err)
	}
	rows, err := e.ob.Pool.Query(ctx, `SELECT event_id, refusal FROM `+e.ob.Table.Ident()+` WHERE refused_at IS NOT NULL ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	type refusal struct{ ID, Why string }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[refusal])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != "bad_type" || !strings.Contains(got[0].Why, "type") ||
		got[1].ID != "not_ours" || !strings.Contains(got[1].Why, "permission denied") ||
		got[2].ID != "taken" || !strings.Contains(got[2].Why, "already") {
		t.Fatalf("refused rows %+v", got)
	}
	if p := e.node.Published(t, "acme"); len(p) != 3 || p["good_1"] != 1 || p["good_2"] != 1 || p["taken"] != 1 {
		t.Fatalf("published %v: want good_1, good_2 and the original taken, once each", p)
	}
	if s := w.Stats(); s.Published != 2 || s.Refused != 3 {
		t.Fatalf("stats %+v", s)
	}
	// The next batch finds nothing: refused rows wait for a person.
	if n, err := w.Batch(ctx); n != 0 || err != nil {
		t.Fatalf("next batch: %d rows, %v", n, err)
	}
	if got := metric(t, reg, "hookline_relay_rows_total", "refused"); got != 3 {
		t.Fatalf("refused counter %v", got)
	}
}

// TestCleanup: relayed rows older than the retention are deleted; waiting
// rows and refused rows are kept whatever their age.
func TestCleanup(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	for i := range 6 {
		e.commitOne(t, fmt.Sprintf("r%d", i))
	}
	w := e.worker(t, relay.Config{Retention: 24 * time.Hour})
	if _, err := w.Batch(ctx); err != nil {
		t.Fatal(err)
	}
	e.commitOne(t, "old_waiting")
	if _, err := e.ob.Pool.Exec(ctx, `INSERT INTO `+e.ob.Table.Ident()+` (event_id, event_type, payload, refused_at, refusal) VALUES ('old_refused', 'a.b', '{}', now(), 'x')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ob.Pool.Exec(ctx, `UPDATE `+e.ob.Table.Ident()+` SET created_at = now() - interval '25 hours' WHERE event_id IN ('r0', 'r1', 'r2', 'old_waiting', 'old_refused')`); err != nil {
		t.Fatal(err)
	}
	n, err := w.Cleanup(ctx)
	if err != nil || n != 3 {
		t.Fatalf("cleanup deleted %d, %v; want r0, r1, r2", n, err)
	}
	rows, err := e.ob.Pool.Query(ctx, `SELECT event_id FROM `+e.ob.Table.Ident())
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(left)
	if strings.Join(left, ",") != "old_refused,old_waiting,r3,r4,r5" {
		t.Fatalf("left %v", left)
	}
}

// TestReconcile sorts each committed row of a range into accepted,
// waiting, lost, mismatched and refused, and repairs the missing ones.
func TestReconcile(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	for _, id := range []string{"ok_1", "ok_2", "ok_3", "changed_1"} {
		e.commitOne(t, id)
	}
	w := e.worker(t, relay.Config{})
	if _, err := w.Batch(ctx); err != nil {
		t.Fatal(err)
	}
	e.commitOne(t, "waiting_1")
	e.commitOne(t, "waiting_2")
	tbl := e.ob.Table.Ident()
	for _, stmt := range []string{
		// A row marked relayed that Hookline never got.
		`INSERT INTO ` + tbl + ` (event_id, event_type, payload, relayed_at) VALUES ('lost_2', 'order.paid', '{"event":"lost_2"}', now())`,
		// A row changed after it was published.
		`UPDATE ` + tbl + ` SET payload = '{"changed":true}' WHERE event_id = 'changed_1'`,
		`INSERT INTO ` + tbl + ` (event_id, event_type, payload, refused_at, refusal) VALUES ('refused_1', 'bad type', '{}', now(), 'invalid')`,
		// Outside the range.
		`INSERT INTO ` + tbl + ` (event_id, event_type, payload, created_at) VALUES ('old_1', 'order.paid', '{}', now() - interval '1 day')`,
	} {
		if _, err := e.ob.Pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	cfg := relay.ReconcileConfig{DB: e.ob.Pool, Table: e.ob.Table, Client: e.c, Since: since}
	rep, err := relay.Reconcile(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"waiting": {"waiting_1", "waiting_2"}, "lost": {"lost_2"}, "mismatched": {"changed_1"}, "refused": {"refused_1"}}
	got := map[string][]string{"waiting": rep.Waiting.IDs, "lost": rep.Lost.IDs, "mismatched": rep.Mismatched.IDs, "refused": rep.Refused.IDs}
	for k, ids := range want {
		sort.Strings(got[k])
		if strings.Join(got[k], ",") != strings.Join(ids, ",") {
			t.Errorf("%s: %v, want %v", k, got[k], ids)
		}
	}
	if rep.Rows != 8 || rep.Accepted != 3 || rep.Missing() != 4 || rep.Repaired != 0 {
		t.Fatalf("report %+v", rep)
	}

	cfg.Repair = true
	rep, err = relay.Reconcile(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Repaired != 3 || rep.RepairedDuplicates != 0 {
		t.Fatalf("repair: %+v", rep)
	}
	cfg.Repair = false
	rep, err = relay.Reconcile(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted != 6 || rep.Waiting.Count != 0 || rep.Lost.Count != 0 || rep.Mismatched.Count != 1 || rep.Refused.Count != 1 {
		t.Fatalf("after repair: %+v", rep)
	}
	// The relay then finds the repaired rows accepted: duplicates, nothing new.
	if _, err := w.Batch(ctx); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Duplicates != 2 {
		t.Fatalf("stats %+v, want the two waiting rows relayed as duplicates", s)
	}
}
