package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
)

// TestGroupFailuresAreIsolated: many appends at once, half of them with a
// wrong expectation: the wrong ones fail alone, the others all land, whatever
// groups the writer formed.
func TestGroupFailuresAreIsolated(t *testing.T) {
	ctx := context.Background()
	l := open(t, embedded.Config{Dir: t.TempDir()})
	const appenders = 64
	errs := make([]error, appenders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range appenders {
		wg.Go(func() {
			<-start
			var exp events.ExpectedRevision = events.NoStream{}
			if i%2 == 1 {
				exp = events.Exact(5)
			}
			_, errs[i] = l.Append(ctx, fmt.Sprintf("g-%d", i), exp, payloadEvent("G", 100), payloadEvent("G", 100))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Errorf("append %d: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, events.ErrWrongRevision) {
			t.Errorf("append %d with a wrong expectation: %v", i, err)
		}
	}
	ws := l.WriterStats()
	if ws.Appends != appenders/2 || ws.Events != appenders || ws.Groups == 0 || ws.Groups > appenders/2 {
		t.Errorf("writer stats %+v, want %d appends of %d events in at most as many groups", ws, appenders/2, appenders)
	}
	t.Logf("writer stats %+v", ws)
	recs, err := l.ReadAll(ctx, events.Start, 1000)
	if err != nil || len(recs) != appenders {
		t.Errorf("log holds %d events (%v), want %d", len(recs), err, appenders)
	}
}
