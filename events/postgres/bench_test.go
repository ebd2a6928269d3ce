package postgres_test

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
	"github.com/hookline/hookline/events/postgres"
)

// benchEventSize is the payload of every benchmark event: 2 KB, about a
// webhook body with its envelope.
const benchEventSize = 2 << 10

var benchPayload = func() []byte {
	p := make([]byte, benchEventSize)
	_, _ = rand.Read(p) // crypto/rand.Read never fails
	return p
}()

// BenchmarkAppend measures appends of one 2 KB event, each appender on its
// own delivery streams, with 1, 16 and 64 concurrent appenders. One op is
// one append; appends/s and the writer's mean group size are reported.
func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			dsn := serverURL(b)
			l := open(b, postgres.Config{DSN: withPool(b, dsn, appenders), Schema: freshSchema(b, dsn)})
			ctx := context.Background()
			var (
				next atomic.Int64
				wg   sync.WaitGroup
			)
			b.SetBytes(benchEventSize)
			b.ResetTimer()
			start := time.Now()
			for a := range appenders {
				wg.Go(func() {
					stream := fmt.Sprintf("delivery-bench%d", a)
					var exp events.ExpectedRevision = events.NoStream{}
					for next.Add(1) <= int64(b.N) {
						ev := events.Event{ID: uuid.New(), Type: "AttemptFailed", Data: benchPayload}
						res, err := l.Append(ctx, stream, exp, ev)
						if err != nil {
							b.Error(err)
							return
						}
						exp = events.Exact(res.Revision)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
			if ws := l.WriterStats(); ws.Groups > 0 {
				b.ReportMetric(float64(ws.Appends)/float64(ws.Groups), "appends/group")
			}
		})
	}
}
