package projections_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// perPartition is a partitioned projection that counts the records it
// applies per partition, in its store, and refuses to apply a record twice
// (it keeps every applied position), so a test sees exactly-once.
type perPartition struct {
	mu   sync.Mutex
	live events.PartitionSet
	told []events.PartitionSet // every set PartitionsChanged was given, in order
}

func (*perPartition) Name() string { return "perpartition" }

func (*perPartition) Filter() events.Filter {
	return events.Filter{Types: []string{"DeliveryExpired"}}
}

func (*perPartition) Apply(b *projections.Batch, rec *events.Record, _ proto.Message) error {
	seen := binary.BigEndian.AppendUint64([]byte("s"), rec.Position.Commit)
	if _, ok, err := b.Get(seen); err != nil || ok {
		return fmt.Errorf("record at %s applied twice (err %v)", rec.Position, err)
	}
	if err := b.Set(seen, nil); err != nil {
		return err
	}
	key := binary.BigEndian.AppendUint16([]byte("n"), uint16(rec.Partition))
	v, _, err := b.Get(key)
	if err != nil {
		return err
	}
	n := uint64(0)
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	return b.Set(key, binary.BigEndian.AppendUint64(nil, n+1))
}

func (p *perPartition) PartitionsChanged(live events.PartitionSet) {
	p.mu.Lock()
	p.live = live
	p.told = append(p.told, live)
	p.mu.Unlock()
}

// toldSince returns the sets PartitionsChanged was given after the first n.
func (p *perPartition) toldSince(n int) []events.PartitionSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.told[min(n, len(p.told)):])
}

// toldCount returns how many sets PartitionsChanged was given.
func (p *perPartition) toldCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.told)
}

func (p *perPartition) liveSet() events.PartitionSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

func countOf(t *testing.T, s *projections.Store, p events.Partition) uint64 {
	t.Helper()
	v, ok, err := s.Get(binary.BigEndian.AppendUint16([]byte("n"), uint16(p)))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// appendIn appends n records of partition p (each in a stream of its own)
// and returns the last position.
func appendIn(t *testing.T, l events.Log, p events.Partition, n int) events.Position {
	t.Helper()
	var last events.Position
	for range n {
		id := uuid.NewString()
		ev, err := events.EncodeIn(&hooklinev1.DeliveryExpired{DeliveryId: id}, "test", id, p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(context.Background(), events.DeliveryStream(id), events.NoStream{}, ev)
		if err != nil {
			t.Fatal(err)
		}
		last = res.Position
	}
	return last
}

func waitParts(t *testing.T, r *projections.Runner, ps events.PartitionSet, pos events.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitForPartitions(ctx, ps, pos); err != nil {
		t.Fatal(err)
	}
}

// TestRunnerPartitions: a node applies the records of its partitions (and
// of none) only; a partition it gains catches up from its checkpoint and
// goes live; one it loses stops at once and, regained, resumes where it
// stopped: every record of an owned partition is applied exactly once,
// across ownership changes and restarts.
func TestRunnerPartitions(t *testing.T) {
	l := openLog(t)
	fs := vfs.NewMem()
	appendIn(t, l, 1, 5)
	appendIn(t, l, 2, 7)
	appendIn(t, l, 3, 2)
	head := appendIn(t, l, events.NoPartition, 3)

	open := func() (*projections.Runner, *projections.Store, *perPartition) {
		r, err := projections.Open(l, projections.Config{Dir: "proj", FS: fs, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		pp := &perPartition{}
		s, err := r.Register(pp)
		if err != nil {
			t.Fatal(err)
		}
		return r, s, pp
	}
	r, s, pp := open()
	r.Own(events.NewPartitionSet(1))
	stop := run(t, r)
	waitParts(t, r, events.NewPartitionSet(1), head)
	want := map[events.Partition]uint64{0: 3, 1: 5, 2: 0, 3: 0}
	check := func(when string) {
		t.Helper()
		for p, n := range want {
			if got := countOf(t, s, p); got != n {
				t.Errorf("%s: partition %d applied %d records, want %d", when, p, got, n)
			}
		}
	}
	check("owning 1")
	if got := pp.liveSet(); got != events.NewPartitionSet(0, 1) {
		t.Errorf("live partitions told to the projection: %s, want 0-1", got)
	}

	// Gain 2 while 1 goes on: 2 catches up, then both are live.
	head = appendIn(t, l, 1, 2)
	r.Own(events.NewPartitionSet(1, 2))
	head = appendIn(t, l, 2, 3)
	waitParts(t, r, events.NewPartitionSet(1, 2), head)
	want[1], want[2] = 7, 10
	check("after gaining 2")

	// Lose 1: its new records are not applied.
	r.Own(events.NewPartitionSet(2))
	appendIn(t, l, 1, 4)
	head = appendIn(t, l, 2, 1)
	waitParts(t, r, events.NewPartitionSet(2), head)
	want[2] = 11
	check("after losing 1")
	if r.Live().Has(1) {
		t.Error("partition 1 still live after it was lost")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if err := r.WaitForPartition(ctx, 1, head); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForPartition of a partition not owned = %v, want a deadline", err)
	}
	cancel()

	// Restart, then regain 1: it resumes from its checkpoint.
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, s, _ = open()
	r.Own(events.NewPartitionSet(1, 2, 3))
	run(t, r)
	head = appendIn(t, l, 3, 1)
	waitParts(t, r, events.NewPartitionSet(1, 2, 3), head)
	want[1], want[3] = 11, 3
	check("after regaining 1 and gaining 3, restarted")
	if lag, err := r.Lag(context.Background()); err != nil || lag.Owned != 3 || lag.Live != 3 {
		t.Errorf("Lag = %+v, %v; want 3 owned, 3 live", lag, err)
	}
}

// TestRunnerPartitionsUnderChurn: partitions gained and lost while records
// stream in, then all owned: every record applied exactly once (a second
// apply would stop the runner); with standbys, the partitions served
// change too, and a standby's records wait to be applied.
func TestRunnerPartitionsUnderChurn(t *testing.T) {
	for _, standbys := range []bool{false, true} {
		t.Run(fmt.Sprintf("standbys=%v", standbys), func(t *testing.T) { testChurn(t, standbys) })
	}
}

func testChurn(t *testing.T, standbys bool) {
	l := openLog(t)
	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler), StandbyDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Register(&perPartition{})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	const parts = 8
	appended := make([]int, parts+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 400 {
			p := events.Partition(1 + i%parts)
			appendIn(t, l, p, 1)
			appended[p]++
		}
	}()
	for i := 0; ; i++ {
		var set events.PartitionSet
		for p := events.Partition(1); p <= parts; p++ {
			if (i>>(p%4))&1 == 1 || int(p) == 1+i%parts {
				set.Add(p)
			}
		}
		r.Own(set)
		if standbys {
			r.Serve(events.NewPartitionSet(events.Partition(1+i%parts), events.Partition(1+(i+3)%parts)))
		}
		select {
		case <-done:
		case <-time.After(3 * time.Millisecond):
			continue
		}
		break
	}
	all := events.NewPartitionSet()
	for p := events.Partition(1); p <= parts; p++ {
		all.Add(p)
	}
	r.Own(all)
	head, err := l.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.WaitForPartitions(ctx, all, head); err != nil {
		t.Fatalf("wait: %v (Run: %v)", err, stop())
	}
	for p := events.Partition(1); p <= parts; p++ {
		if got := countOf(t, s, p); got != uint64(appended[p]) {
			t.Errorf("partition %d: applied %d, appended %d", p, got, appended[p])
		}
	}
}

// TestRunnerCrashWithoutWAL: the store keeps no write-ahead log, so a crash
// loses what was not flushed; state and checkpoints are lost together, and
// the runner applies those records again: each exactly once in the end.
func TestRunnerCrashWithoutWAL(t *testing.T) {
	l := openLog(t)
	fs := vfs.NewCrashableMem()
	open := func() (*projections.Runner, *projections.Store) {
		r, err := projections.Open(l, projections.Config{Dir: "proj", FS: fs, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s, err := r.Register(&perPartition{})
		if err != nil {
			t.Fatal(err)
		}
		r.Own(events.NewPartitionSet(1))
		return r, s
	}
	r, s := open()
	stop := run(t, r)
	head := appendIn(t, l, 1, 30)
	waitParts(t, r, events.NewPartitionSet(1), head)
	if got := countOf(t, s, 1); got != 30 {
		t.Fatalf("applied %d, want 30", got)
	}
	// Crash: nothing written since the last sync survives.
	stop()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	r.Close()
	fs = crashed

	r, s = open()
	run(t, r)
	head = appendIn(t, l, 1, 5)
	waitParts(t, r, events.NewPartitionSet(1), head)
	if got := countOf(t, s, 1); got != 35 {
		t.Errorf("after the crash: applied %d, want 35", got)
	}
}
