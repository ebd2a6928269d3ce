package projections_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// flakyLog is a log whose first subscriptions fail, as a PostgreSQL log's
// do when its server restarts, each after handing over one batch.
type flakyLog struct {
	events.Log
	mu    sync.Mutex // guards fails
	fails int        // subscriptions still to fail
}

var errConnLost = errors.New("terminating connection due to administrator command")

func (f *flakyLog) Subscribe(ctx context.Context, from events.Position, filter events.Filter, fn events.SubscribeFunc) error {
	f.mu.Lock()
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if !fail {
		return f.Log.Subscribe(ctx, from, filter, fn)
	}
	// One batch goes through, then the connection is lost.
	return f.Log.Subscribe(ctx, from, filter, func(recs []events.Record, through events.Position) error {
		if err := fn(recs, through); err != nil {
			return err
		}
		return errConnLost
	})
}

// TestRunnerSurvivesLostLog: subscriptions that fail (the log's server
// restarting) are made again from the checkpoints; Run goes on and every
// record is applied exactly once (a second apply would stop it).
func TestRunnerSurvivesLostLog(t *testing.T) {
	raw := openLog(t)
	l := &flakyLog{Log: raw, fails: 3}
	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pp := &perPartition{}
	s, err := r.Register(pp)
	if err != nil {
		t.Fatal(err)
	}
	r.Own(events.NewPartitionSet(1))
	stop := run(t, r)
	// Records keep coming until every failing subscription has failed.
	total := 0
	for {
		head := appendIn(t, raw, 1, 10)
		total += 10
		waitParts(t, r, events.NewPartitionSet(1), head)
		l.mu.Lock()
		left := l.fails
		l.mu.Unlock()
		if left == 0 {
			break
		}
	}
	head := appendIn(t, raw, 1, 10)
	total += 10
	waitParts(t, r, events.NewPartitionSet(1), head)
	if got := countOf(t, s, 1); got != uint64(total) {
		t.Errorf("applied %d records, want %d", got, total)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}
