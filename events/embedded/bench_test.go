package embedded_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
)

// benchEventSize is the payload of every benchmark event: 2 KB, about a
// webhook body with its envelope.
const benchEventSize = 2 << 10

// benchPayloads are random, so incompressible, and far apart enough that
// Pebble's block compression finds no repeats: a worst case for the disk.
var benchPayloads = func() [][]byte {
	p := make([][]byte, 256)
	for i := range p {
		p[i] = make([]byte, benchEventSize)
		_, _ = rand.Read(p[i]) // crypto/rand.Read never fails
	}
	return p
}()

var benchNext atomic.Uint64

func benchEvents(n int) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		data := benchPayloads[benchNext.Add(1)%uint64(len(benchPayloads))]
		evs[i] = events.Event{ID: uuid.New(), Type: "EventPublished", Data: data}
	}
	return evs
}

// BenchmarkAppend measures appends on disk (fsync before each ack) with 1
// and 64 concurrent appenders, each on its own stream with Exact, of 1 and
// 10 events per append. One op is one append.
func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 64} {
		for _, perAppend := range []int{1, 10} {
			b.Run(fmt.Sprintf("appenders=%d/events=%d", appenders, perAppend), func(b *testing.B) {
				benchAppend(b, appenders, perAppend)
			})
		}
	}
}

func benchAppend(b *testing.B, appenders, perAppend int) {
	ctx := context.Background()
	l, err := embedded.Open(embedded.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	b.SetBytes(int64(perAppend * benchEventSize))
	b.ResetTimer()
	start := time.Now()
	for a := range appenders {
		wg.Go(func() {
			stream := fmt.Sprintf("bench-%d", a)
			var exp events.ExpectedRevision = events.NoStream{}
			for next.Add(1) <= int64(b.N) {
				evs := benchEvents(perAppend)
				res, err := l.Append(ctx, stream, exp, evs...)
				if err != nil {
					b.Error(err)
					return
				}
				exp = events.Exact(res.Revision)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*perAppend)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	if ws := l.WriterStats(); ws.Groups > 0 {
		b.ReportMetric(float64(ws.Appends)/float64(ws.Groups), "appends/fsync")
		b.ReportMetric(elapsed.Seconds()*1e3/float64(ws.Groups), "ms/fsync")
	}
}

// BenchmarkSubscribeCatchUp measures how fast a subscriber reads a log of
// b.N events already on disk, from Start. One op is one event.
func BenchmarkSubscribeCatchUp(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := embedded.Open(embedded.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	exp := events.ExpectedRevision(events.NoStream{})
	for written := 0; written < b.N; {
		n := min(100, b.N-written)
		res, err := l.Append(ctx, "bench-1", exp, benchEvents(n)...)
		if err != nil {
			b.Fatal(err)
		}
		exp, written = events.Exact(res.Revision), written+n
	}
	b.SetBytes(benchEventSize)
	b.ResetTimer()
	start := time.Now()
	seen := 0
	err = l.Subscribe(ctx, events.Start, events.Filter{}, func(recs []events.Record, _ events.Position) error {
		if seen += len(recs); seen >= b.N {
			return errStopBench
		}
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if err != errStopBench {
		b.Fatalf("subscribe: %v after %d events", err, seen)
	}
	b.ReportMetric(float64(seen)/elapsed.Seconds(), "events/s")
}

var errStopBench = fmt.Errorf("bench: stop")
