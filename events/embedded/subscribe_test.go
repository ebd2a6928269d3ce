package embedded_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
)

func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestIdleSubscribersSleep: subscribers waiting at the head of the log take
// no CPU (they are parked on the writer's commit channel, there is no polling
// loop), and every one of them wakes as soon as an append commits.
func TestIdleSubscribersSleep(t *testing.T) {
	const subscribers = 100
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := open(t, embedded.Config{Dir: "db", FS: vfs.NewMem()})
	if _, err := l.Append(ctx, "warm-1", events.NoStream{}, payloadEvent("Warm", 10)); err != nil {
		t.Fatal(err)
	}
	head, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	woke := make(chan time.Time, subscribers)
	var wg sync.WaitGroup
	for range subscribers {
		wg.Go(func() {
			err := l.Subscribe(ctx, head, events.Filter{}, func([]events.Record, events.Position) error {
				woke <- time.Now()
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("subscribe: %v", err)
			}
		})
	}
	defer wg.Wait()
	defer cancel()

	// Idle for a while: a polling loop in 100 subscribers would show in
	// every window; the subscribers' start, the race detector's or the
	// garbage collector's work in one of them would not show in all.
	// This waits on purpose; it synchronises nothing.
	const idle, windows = 300 * time.Millisecond, 3
	least, wall := time.Duration(1<<62), time.Duration(0)
	for range windows {
		cpu0, wall0 := cpuTime(t), time.Now()
		time.Sleep(idle)
		if cpu := cpuTime(t) - cpu0; cpu < least {
			least, wall = cpu, time.Since(wall0)
		}
	}
	t.Logf("%d idle subscribers: %s CPU in %s (the least of %d windows)", subscribers, least, wall, windows)
	if least > wall/5 {
		t.Errorf("%d idle subscribers used %s of CPU in %s, in each of %d windows: something polls", subscribers, least, wall, windows)
	}

	sent := time.Now()
	if _, err := l.Append(ctx, "wake-1", events.NoStream{}, payloadEvent("Wake", 10)); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for range subscribers {
		select {
		case at := <-woke:
			slowest = max(slowest, at.Sub(sent))
		case <-time.After(10 * time.Second):
			t.Fatal("a subscriber did not wake on an append")
		}
	}
	t.Logf("all %d subscribers woke within %s of the append", subscribers, slowest)
}

// TestReopen: what was written is there after Close and Open, and the log
// goes on from where it was: revisions, positions, expectations.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	cfg := embedded.Config{Dir: "db", FS: fs}
	l, err := embedded.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.Append(ctx, "s-1", events.NoStream{}, payloadEvent("A", 10), payloadEvent("B", 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = open(t, cfg)
	head, err := l.Head(ctx)
	if err != nil || head != first.Position {
		t.Fatalf("head after reopen = %s (%v), want %s", head, err, first.Position)
	}
	_, err = l.Append(ctx, "s-1", events.NoStream{}, payloadEvent("C", 10))
	if !errors.Is(err, events.ErrWrongRevision) {
		t.Errorf("NoStream on a reopened stream: %v, want ErrWrongRevision", err)
	}
	next, err := l.Append(ctx, "s-1", events.Exact(1), payloadEvent("C", 10))
	if err != nil {
		t.Fatal(err)
	}
	if next.Revision != 2 || !first.Position.Less(next.Position) {
		t.Errorf("append after reopen landed at %+v, want revision 2 after %s", next, first.Position)
	}
	recs, err := l.ReadAll(ctx, events.Start, 10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("read all after reopen: %d records, %v; want 3", len(recs), err)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  embedded.Config
		ok   bool
	}{
		{"DirOnly", embedded.Config{Dir: "x"}, true},
		{"Zero", embedded.Config{}, false},
		{"NegativeSize", embedded.Config{Dir: "x", MaxEventSize: -1}, false},
		{"NegativeRetention", embedded.Config{Dir: "x", Retention: -time.Hour}, false},
		{"NegativeInterval", embedded.Config{Dir: "x", RetainEvery: -time.Hour}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.cfg.Validate(); (err == nil) != c.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, c.ok)
			}
			if !c.ok {
				if _, err := embedded.Open(c.cfg); err == nil {
					t.Error("Open accepted an invalid config")
				}
			}
		})
	}
}
