package archive_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
)

func records(stream string, n int, commit uint64, label string) []events.Record {
	out := make([]events.Record, n)
	for i := range out {
		out[i] = events.Record{Stream: stream, Revision: events.Revision(i), Position: events.Position{Commit: commit + uint64(i), Prepare: commit + uint64(i)},
			ID: uuid.New(), Type: "T", Data: fmt.Appendf(nil, "%s %d", label, i), Metadata: []byte(`{}`),
			Recorded: time.Date(2026, 12, 3, 7, 0, i, 0, time.UTC), Partition: events.Partition(i % 3)}
	}
	return out
}

func open(t *testing.T, dir string) *archive.Archive {
	t.Helper()
	a, err := archive.Open(t.Context(), "file://"+dir+"?create_dir=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// TestWriteRead: records written in one segment read back whole, per
// stream and in revision order, through another Archive on the same
// bucket (another node); a stream archived again reads from its newest
// segment (for a node that had not read the older one's index yet); a stream never archived is not found; the counts add up.
func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	one, two := open(t, dir), open(t, dir)
	a, b := records("event-t.e1", 3, 10, "a"), records("delivery-d1", 2, 13, "b")
	if err := one.Write(t.Context(), append(b, a...)); err != nil {
		t.Fatal(err)
	}
	got, err := two.ReadStream(t.Context(), "event-t.e1")
	if err != nil || len(got) != 3 {
		t.Fatalf("read back: %d records, %v", len(got), err)
	}
	for i, r := range got {
		w := a[i]
		if r.Stream != w.Stream || r.Revision != w.Revision || r.Position != w.Position || r.ID != w.ID || !bytes.Equal(r.Data, w.Data) ||
			!r.Recorded.Equal(w.Recorded) || r.Partition != w.Partition || r.Type != w.Type || !bytes.Equal(r.Metadata, w.Metadata) {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
	}
	again := records("delivery-d1", 3, 20, "b2")
	if err := one.Write(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if got, err := open(t, dir).ReadStream(t.Context(), "delivery-d1"); err != nil || len(got) != 3 || string(got[2].Data) != "b2 2" {
		t.Fatalf("a stream archived again: %d records, %v", len(got), err)
	}
	if _, err := two.ReadStream(t.Context(), "event-t.never"); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("a stream never archived: %v", err)
	}
	st, err := two.Stats(t.Context())
	if err != nil || st.Segments != 2 || st.Streams != 2 || st.Records != 8 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
}

// TestDamagedSegment: a segment whose bytes were changed fails its read
// with an error naming it, instead of returning wrong records.
func TestDamagedSegment(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	if err := a.Write(t.Context(), records("event-t.e1", 2, 1, "x")); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "segments", "*.zst"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v, %v", segs, err)
	}
	if err := os.WriteFile(segs[0], []byte("not zstd"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, dir).ReadStream(t.Context(), "event-t.e1"); err == nil || !bytes.Contains([]byte(err.Error()), []byte("damaged")) {
		t.Fatalf("a damaged segment: %v", err)
	}
}

// TestThrottled: a throttled reader that just missed does not list the
// bucket again for a while (made-up ids cannot make it list on each
// read); the archive itself finds what another node archived since at
// once.
func TestThrottled(t *testing.T) {
	dir := t.TempDir()
	writer, reader := open(t, dir), open(t, dir)
	api := reader.Throttled()
	if _, err := api.ReadStream(t.Context(), "event-t.made_up"); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("a made-up stream: %v", err)
	}
	if err := writer.Write(t.Context(), records("event-t.e1", 1, 1, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ReadStream(t.Context(), "event-t.e1"); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("a throttled read right after a miss listed the bucket again: %v", err)
	}
	if got, err := reader.ReadStream(t.Context(), "event-t.e1"); err != nil || len(got) != 1 {
		t.Fatalf("the archive's own read: %d records, %v", len(got), err)
	}
}

// TestPurge: the streams drop names leave the archive, on this node and
// for a node that opens it afterwards; the others stay whole, and the
// counts follow.
func TestPurge(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	if err := a.Write(t.Context(), append(records("event-gone.e1", 2, 1, "g"), records("event-kept.e1", 3, 3, "k")...)); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(t.Context(), records("event-kept.e2", 1, 10, "k")); err != nil {
		t.Fatal(err)
	}
	n, err := a.Purge(t.Context(), func(stream string, recs []events.Record) bool {
		return strings.HasPrefix(stream, "event-gone.") && len(recs) == 2
	})
	if err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	for _, r := range []*archive.Archive{a, open(t, dir)} {
		if _, err := r.ReadStream(t.Context(), "event-gone.e1"); !errors.Is(err, events.ErrStreamNotFound) {
			t.Fatalf("a purged stream: %v", err)
		}
		if got, err := r.ReadStream(t.Context(), "event-kept.e1"); err != nil || len(got) != 3 {
			t.Fatalf("a kept stream of the rewritten segment: %d, %v", len(got), err)
		}
		if st, err := r.Stats(t.Context()); err != nil || st.Segments != 2 || st.Streams != 2 || st.Records != 4 {
			t.Fatalf("stats after the purge: %+v, %v", st, err)
		}
	}
}

// TestReadWhilePurging: a node that lists the indexes while another purges
// reads no error from an index deleted between its listing and its read
// (the purge wrote the streams it keeps into a new index first), and finds
// every kept stream.
func TestReadWhilePurging(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir)
	const rounds = 40
	done := make(chan error, 1)
	go func() {
		for i := range rounds {
			recs := append(records(fmt.Sprintf("event-gone.e%d", i), 2, uint64(10*i+1), "g"), records(fmt.Sprintf("event-kept.e%d", i), 3, uint64(10*i+3), "k")...)
			if err := w.Write(t.Context(), recs); err != nil {
				done <- err
				return
			}
			if _, err := w.Purge(t.Context(), func(stream string, _ []events.Record) bool { return strings.HasPrefix(stream, "event-gone.") }); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	reads := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			r := open(t, dir)
			for i := range rounds {
				if ok, err := r.Has(t.Context(), fmt.Sprintf("event-kept.e%d", i)); err != nil || !ok {
					t.Fatalf("after the purges, kept stream %d: %v, %v", i, ok, err)
				}
			}
			t.Logf("%d reads while purging", reads)
			return
		default:
		}
		r := open(t, dir)
		if _, err := r.Has(t.Context(), "event-kept.e0"); err != nil {
			t.Fatalf("a read while another node purges: %v", err)
		}
		_ = r.Close()
		reads++
	}
}

// TestPurgeOfTheNewestRecords: a purge that removes the stream holding a
// segment's newest records leaves the kept streams readable, through the
// purging archive and through another that had read the old index before
// the purge deleted it.
func TestPurgeOfTheNewestRecords(t *testing.T) {
	dir := t.TempDir()
	a, other := open(t, dir), open(t, dir)
	if err := a.Write(t.Context(), append(records("event-kept.e1", 3, 1, "k"), records("event-gone.e1", 2, 4, "g")...)); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.Has(t.Context(), "event-kept.e1"); err != nil || !ok {
		t.Fatalf("before the purge, the other archive: %v, %v", ok, err)
	}
	if n, err := a.Purge(t.Context(), func(stream string, _ []events.Record) bool { return strings.HasPrefix(stream, "event-gone.") }); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	for name, r := range map[string]*archive.Archive{"purging": a, "other": other} {
		if got, err := r.ReadStream(t.Context(), "event-kept.e1"); err != nil || len(got) != 3 {
			t.Errorf("%s archive, a kept stream: %d records, %v", name, len(got), err)
		}
		if _, err := r.ReadStream(t.Context(), "event-gone.e1"); !errors.Is(err, events.ErrStreamNotFound) {
			t.Errorf("%s archive, the purged stream: %v", name, err)
		}
	}
}
