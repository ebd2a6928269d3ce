package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/client/outbox"
	"github.com/hookline/hookline/client/outbox/relay"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// firstAttempts records when each event's first attempt reached the
// receiver. It is safe for concurrent use.
type firstAttempts struct {
	mu    sync.Mutex // guards first
	first map[string]time.Time
	count atomic.Int64 // distinct events seen
}

func (f *firstAttempts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	id := r.Header.Get("webhook-event-id")
	f.mu.Lock()
	if _, ok := f.first[id]; !ok {
		f.first[id] = at
		f.count.Add(1)
	}
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *firstAttempts) at(id string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.first[id]
	return t, ok
}

// BenchmarkRelay measures the relay with its defaults (batches of 100, 2 in
// flight, polling every 100 ms; see benchWorker to change them) in front
// of a node in this process delivering to a loopback
// receiver, everything on this machine. Two phases, run once whatever b.N
// (use -benchtime=1x):
//
//   - max: 10,000 rows committed beforehand, relayed as fast as the relay
//     goes: rows/s, from the first batch to the last row marked;
//
//   - latency: producers commit one row per transaction at half that rate
//     for 10 s; for each row, the time from its commit returning to its
//     event's first delivery attempt reaching the receiver: p50, p99.
//
//     eval "$(.ci/postgres.sh)"
//     go test -run XXX -bench Relay -benchtime=1x ./client/outbox/relay
func BenchmarkRelay(b *testing.B) {
	const backlog, seconds = 10000, 10
	e := newBenchEnv(b)
	ctx := context.Background()
	body := []byte(`{"order":"o","lines":[` + strings.Repeat(`{"sku":"sku-0001","qty":1,"price":1999},`, 24) + `{"sku":"end"}]}`) // about 1 KB

	// Phase 1: the relay's maximum.
	rows := make([][]any, backlog)
	for i := range rows {
		rows[i] = []any{fmt.Sprintf("max_%05d", i), "order.paid", body}
	}
	schema, name, _ := strings.Cut(string(e.ob.Table), ".")
	if _, err := e.ob.Pool.CopyFrom(ctx, pgx.Identifier{schema, name}, []string{"event_id", "event_type", "payload"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	w := e.benchWorker(b)
	b.ResetTimer()
	start := time.Now()
	stop := runBench(b, w)
	for w.Stats().Published < backlog {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("relayed %d of %d rows in 5 minutes", w.Stats().Published, backlog)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not a wait for an event
	}
	maxRate := float64(backlog) / time.Since(start).Seconds()
	stop()
	// Let the node deliver the backlog before measuring latency.
	for e.rcv.count.Load() < backlog {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("delivered %d of %d", e.rcv.count.Load(), backlog)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for an event
	}

	// Phase 2: commit to first attempt at half the maximum.
	rate := maxRate / 2
	w = e.benchWorker(b)
	stop = runBench(b, w)
	defer stop()
	total := int(rate * seconds)
	committed := make([]time.Time, total)
	tokens := make(chan int, 1024)
	go func() {
		defer close(tokens)
		begin := time.Now()
		for i := range total {
			if d := time.Until(begin.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d) // pacing the producers, not synchronising
			}
			tokens <- i
		}
	}()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range tokens {
				tx, err := e.ob.Pool.Begin(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := outbox.Insert(ctx, tx, e.ob.Table, outbox.Event{ID: fmt.Sprintf("lat_%06d", i), Type: "order.paid", Payload: body}); err != nil {
					b.Error(err)
					return
				}
				if err := tx.Commit(ctx); err != nil {
					b.Error(err)
					return
				}
				committed[i] = time.Now()
			}
		})
	}
	phase := time.Now()
	wg.Wait()
	offered := float64(total) / time.Since(phase).Seconds()
	for e.rcv.count.Load() < int64(backlog+total) {
		if time.Since(phase) > 5*time.Minute {
			b.Fatalf("delivered %d of %d", e.rcv.count.Load()-backlog, total)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for an event
	}
	lat := make([]float64, 0, total)
	for i := range total {
		at, ok := e.rcv.at(fmt.Sprintf("lat_%06d", i))
		if !ok {
			b.Fatalf("lat_%06d never arrived", i)
		}
		lat = append(lat, float64(at.Sub(committed[i]).Microseconds())/1000)
	}
	slices.Sort(lat)
	// The relay's part: from the row's insert to its mark, in the
	// database's clock.
	var relayP50, relayP99 float64
	if err := e.ob.Pool.QueryRow(ctx, `SELECT
		percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM relayed_at - created_at)),
		percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM relayed_at - created_at))
		FROM `+e.ob.Table.Ident()+` WHERE event_id LIKE 'lat_%'`).Scan(&relayP50, &relayP99); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(relayP50*1000, "relay_p50_ms")
	b.ReportMetric(relayP99*1000, "relay_p99_ms")
	b.ReportMetric(maxRate, "max_rows/s")
	b.ReportMetric(offered, "offered_rows/s")
	b.ReportMetric(lat[len(lat)/2], "p50_ms")
	b.ReportMetric(lat[len(lat)*99/100], "p99_ms")
	b.ReportMetric(lat[len(lat)-1], "max_ms")
}

// benchEnv is a node with one endpoint on a recording receiver, and an
// outbox.
type benchEnv struct {
	*env
	rcv *firstAttempts
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	e := newEnv(b, 40)
	rcv := &firstAttempts{first: map[string]time.Time{}}
	srv := httptest.NewServer(rcv)
	b.Cleanup(srv.Close)
	ctx := context.Background()
	if _, err := e.c.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{EndpointId: "ep_bench", Settings: &controlv1.EndpointSettings{
		Url: srv.URL + "/in", EventTypes: []string{"order.paid"}, RatePerSecond: 10000, Burst: 1000, MaxInFlight: 256,
	}}); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{env: e, rcv: rcv}
}

func (e *benchEnv) benchWorker(b *testing.B) *relay.Worker {
	b.Helper()
	cfg := relay.Config{DB: e.ob.Pool, Table: e.ob.Table, Client: e.c, Logger: clienttest.Logger()}
	// The relay's settings, to explore: HOOKLINE_BENCH_RELAY_BATCH,
	// _IN_FLIGHT, _POLL (a duration); unset means the defaults.
	_, _ = fmt.Sscan(os.Getenv("HOOKLINE_BENCH_RELAY_BATCH"), &cfg.BatchSize)
	_, _ = fmt.Sscan(os.Getenv("HOOKLINE_BENCH_RELAY_IN_FLIGHT"), &cfg.InFlight)
	if d, err := time.ParseDuration(os.Getenv("HOOKLINE_BENCH_RELAY_POLL")); err == nil {
		cfg.PollEvery = d
	}
	w, err := relay.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func runBench(b *testing.B, w *relay.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Error(err)
			}
		})
	}
}
