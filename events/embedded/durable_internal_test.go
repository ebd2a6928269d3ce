package embedded

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
)

// syncGate holds the syncs of the write-ahead log while it is shut: the
// moment between Pebble making a batch visible and the batch being
// durable, which is otherwise too short to look into.
type syncGate struct {
	shut    atomic.Bool
	entered chan struct{} // a value each time a sync starts waiting
	open    chan struct{} // closed to let the waiting syncs through
}

func (g *syncGate) wait() {
	if g.shut.Load() {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.open
	}
}

// gatedFS is a file system whose write-ahead log files sync through g.
type gatedFS struct {
	vfs.FS
	g *syncGate
}

func (fs gatedFS) gated(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return gatedFile{File: f, g: fs.g}, nil
}

func (fs gatedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.gated(f, name, err)
}

func (fs gatedFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.gated(f, newname, err)
}

type gatedFile struct {
	vfs.File
	g *syncGate
}

func (f gatedFile) Sync() error     { f.g.wait(); return f.File.Sync() }
func (f gatedFile) SyncData() error { f.g.wait(); return f.File.SyncData() }
func (f gatedFile) SyncTo(n int64) (bool, error) {
	f.g.wait()
	return f.File.SyncTo(n)
}

// TestReadsStopAtDurable appends while the write-ahead log cannot sync,
// waits until Pebble shows the batch, and checks that no read of the log
// returns it before its append is acknowledged: a projection that read it
// would checkpoint past a record that a power cut takes back, and skip the
// record a later append puts at the same position.
func TestReadsStopAtDurable(t *testing.T) {
	ctx := context.Background()
	g := &syncGate{entered: make(chan struct{}, 1), open: make(chan struct{})}
	l, err := Open(Config{Dir: "log", FS: gatedFS{FS: vfs.NewMem(), g: g}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ev := func(typ string) events.Event { return events.Event{ID: uuid.New(), Type: typ, Data: []byte(`{}`)} }
	first, err := l.Append(ctx, "a", events.NoStream{}, ev("first"))
	if err != nil {
		t.Fatal(err)
	}

	// held appends evs to stream while the log cannot sync, runs check
	// once Pebble shows the append, then lets it finish.
	held := func(stream string, expected events.ExpectedRevision, check func(seq uint64)) {
		t.Helper()
		g.shut.Store(true)
		seq := l.seq.Load() + 1
		done := make(chan error, 1)
		go func() {
			_, err := l.Append(ctx, stream, expected, ev("held"))
			done <- err
		}()
		select {
		case <-g.entered:
		case err := <-done:
			t.Fatalf("the append to %s returned (%v) while its sync was held", stream, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the append never synced")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, closer, err := l.db.Get(logKey(seq))
			if err == nil {
				closer.Close()
				break
			}
			if !errors.Is(err, pebble.ErrNotFound) || time.Now().After(deadline) {
				t.Fatalf("Pebble never showed record %d: %v", seq, err)
			}
			time.Sleep(time.Millisecond) // poll interval
		}
		check(seq)
		g.shut.Store(false)
		close(g.open)
		if err := <-done; err != nil {
			t.Fatalf("the held append to %s: %v", stream, err)
		}
		g.open = make(chan struct{})
	}

	held("a", events.Exact(0), func(seq uint64) {
		if recs, err := l.ReadAll(ctx, events.Start, 10); err != nil || len(recs) != 1 {
			t.Errorf("ReadAll before the sync: %d records (%v), want the durable one only", len(recs), err)
		}
		if head, err := l.Head(ctx); err != nil || head != first.Position {
			t.Errorf("Head before the sync: %v (%v), want the durable %v", head, err, first.Position)
		}
		if recs, err := l.ReadStream(ctx, "a", events.Backwards, events.End, 10); err != nil || len(recs) != 1 || recs[0].Revision != 0 {
			t.Errorf("ReadStream a backwards before the sync: %d records (%v), want revision 0 only", len(recs), err)
		}
		if recs, err := l.ReadStream(ctx, "a", events.Forwards, 1, 10); err != nil || len(recs) != 0 {
			t.Errorf("ReadStream a from revision 1 before the sync: %d records (%v), want none", len(recs), err)
		}
	})
	if recs, err := l.ReadAll(ctx, events.Start, 10); err != nil || len(recs) != 2 {
		t.Errorf("ReadAll once synced: %d records (%v), want 2", len(recs), err)
	}
	held("b", events.NoStream{}, func(uint64) {
		if recs, err := l.ReadStream(ctx, "b", events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
			t.Errorf("ReadStream of a stream not yet durable: %d records (%v), want ErrStreamNotFound", len(recs), err)
		}
	})
	if recs, err := l.ReadStream(ctx, "b", events.Forwards, 0, 10); err != nil || len(recs) != 1 {
		t.Errorf("ReadStream b once synced: %d records (%v), want 1", len(recs), err)
	}
}
