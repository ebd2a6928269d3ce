package projections

import (
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStagingWritesNetEffect applies sequences of writes through a staged
// Batch and checks both what the commit leaves in the store and how many
// operations reached the Pebble batch: a key set and single-deleted in one
// commit must cost nothing.
func TestStagingWritesNetEffect(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	prefix := []byte("pX")
	var indexed bool // the last commit's batch was an indexed one
	commit := func(fn func(b *Batch)) uint32 {
		t.Helper()
		st := newStaging(db)
		defer st.close()
		var hooks []func()
		b := newStagedBatch(st, prefix, &hooks)
		fn(&b)
		if err := st.flush(); err != nil {
			t.Fatal(err)
		}
		n := st.pb.Count()
		indexed = st.indexed
		if err := st.pb.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return n
	}
	stored := func(key string) (string, bool) {
		t.Helper()
		v, ok, err := (view{rd: db, prefix: prefix}).Get([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return string(v), ok
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Set and single-delete in one commit: nothing written.
	if n := commit(func(b *Batch) {
		must(b.Set([]byte("gone"), []byte("1")))
		if v, ok, err := b.Get([]byte("gone")); err != nil || !ok || string(v) != "1" {
			t.Errorf("Get of a staged set = %q, %v, %v", v, ok, err)
		}
		must(b.SingleDelete([]byte("gone")))
		if _, ok, err := b.Get([]byte("gone")); err != nil || ok {
			t.Errorf("Get after the single delete found it (%v)", err)
		}
		must(b.Set([]byte("kept"), []byte("a")))
		must(b.Set([]byte("kept"), []byte("b")))
		must(b.Set([]byte("moved"), []byte("x")))
	}); n != 2 {
		t.Errorf("first commit wrote %d operations, want 2 (kept, moved)", n)
	}
	if indexed {
		t.Error("a commit that opened no iterator used an indexed batch")
	}
	if _, ok := stored("gone"); ok {
		t.Error("a key set and single-deleted in one commit is in the store")
	}
	if v, _ := stored("kept"); v != "b" {
		t.Errorf("kept = %q, want the last write b", v)
	}

	// A key the store holds: single-deleted and set again is both written
	// (the discipline of set once between deletes holds in the store);
	// set then deleted is a delete.
	if n := commit(func(b *Batch) {
		if v, ok, err := b.Get([]byte("moved")); err != nil || !ok || string(v) != "x" {
			t.Errorf("Get through to the store = %q, %v, %v", v, ok, err)
		}
		must(b.SingleDelete([]byte("moved")))
		must(b.Set([]byte("moved"), []byte("y")))
		must(b.Set([]byte("kept"), []byte("c")))
		must(b.Delete([]byte("kept")))
	}); n != 3 {
		t.Errorf("second commit wrote %d operations, want 3", n)
	}
	if v, ok := stored("moved"); !ok || v != "y" {
		t.Errorf("moved = %q, %v, want y", v, ok)
	}
	if _, ok := stored("kept"); ok {
		t.Error("kept survived its delete")
	}

	// Single-deleted, set, single-deleted again: the store's value goes.
	commit(func(b *Batch) {
		must(b.SingleDelete([]byte("moved")))
		must(b.Set([]byte("moved"), []byte("z")))
		must(b.SingleDelete([]byte("moved")))
	})
	if _, ok := stored("moved"); ok {
		t.Error("moved survived delete, set, delete")
	}

	// An iterator sees what is staged; writes after it are staged again.
	commit(func(b *Batch) {
		must(b.Set([]byte("i1"), []byte("1")))
		must(b.Set([]byte("i2"), []byte("2")))
		var keys []string
		must(b.ScanPrefix([]byte("i"), func(k, _ []byte) (bool, error) {
			keys = append(keys, string(k))
			return true, nil
		}))
		if len(keys) != 2 {
			t.Errorf("scan saw %q, want i1 and i2", keys)
		}
		must(b.Set([]byte("i3"), []byte("3")))
		must(b.SingleDelete([]byte("i3")))
	})
	if !indexed {
		t.Error("a commit that opened an iterator did not index its batch")
	}
	if _, ok := stored("i2"); !ok {
		t.Error("a write flushed for an iterator is not in the store")
	}

	// A range deleted, then read in the same commit: gone, the keys
	// written after it are there, and so is what was staged before it.
	commit(func(b *Batch) {
		must(b.Set([]byte("r0"), []byte("0")))
		must(b.DeleteRange([]byte("i"), []byte("j")))
		for _, k := range []string{"i1", "i2"} {
			if _, ok, err := b.Get([]byte(k)); err != nil || ok {
				t.Errorf("Get(%s) after its range was deleted found it (%v)", k, err)
			}
		}
		must(b.Set([]byte("i4"), []byte("4")))
		if v, ok, err := b.Get([]byte("i4")); err != nil || !ok || string(v) != "4" {
			t.Errorf("Get of a write after the range delete = %q, %v, %v", v, ok, err)
		}
		if v, ok, err := b.Get([]byte("r0")); err != nil || !ok || string(v) != "0" {
			t.Errorf("Get of a write spilled by the range delete = %q, %v, %v", v, ok, err)
		}
	})
	for k, want := range map[string]bool{"i1": false, "i2": false, "i4": true, "r0": true} {
		if _, ok := stored(k); ok != want {
			t.Errorf("after the range delete, %s in the store: %v, want %v", k, ok, want)
		}
	}
	if _, ok := stored("i3"); ok {
		t.Error("i3, set and single-deleted after the iterator, is in the store")
	}
}
