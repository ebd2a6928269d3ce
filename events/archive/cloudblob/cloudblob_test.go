package cloudblob_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "gocloud.dev/blob/memblob"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/events/archive/cloudblob"
)

// TestArchiveOnCloudBucket: an archive on a gocloud.dev bucket (memblob, a
// process-local store with the drivers' semantics) writes and reads back a
// stream, and a missing object reads as archive.ErrNoObject, which the
// archive turns into events.ErrStreamNotFound.
func TestArchiveOnCloudBucket(t *testing.T) {
	b, err := cloudblob.Open(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadAll(t.Context(), "index/none.idx"); !errors.Is(err, archive.ErrNoObject) {
		t.Fatalf("a missing object: %v, want archive.ErrNoObject", err)
	}
	if err := b.Delete(t.Context(), "index/none.idx"); !errors.Is(err, archive.ErrNoObject) {
		t.Fatalf("deleting a missing object: %v, want archive.ErrNoObject", err)
	}
	a := archive.New(b, "mem://", nil)
	t.Cleanup(func() { _ = a.Close() })
	recs := make([]events.Record, 3)
	for i := range recs {
		recs[i] = events.Record{Stream: "event-t.e1", Revision: events.Revision(i), Position: events.Position{Commit: uint64(i + 1), Prepare: uint64(i + 1)},
			ID: uuid.New(), Type: "T", Data: fmt.Appendf(nil, "d%d", i), Recorded: time.Date(2026, 12, 3, 7, 0, i, 0, time.UTC)}
	}
	if err := a.Write(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	got, err := a.ReadStream(t.Context(), "event-t.e1")
	if err != nil || len(got) != 3 || string(got[2].Data) != "d2" {
		t.Fatalf("read back: %d records, %v", len(got), err)
	}
	keys, err := b.List(t.Context(), "index/")
	if err != nil || len(keys) != 1 {
		t.Fatalf("indexes listed: %v, %v", keys, err)
	}
	if _, err := a.ReadStream(t.Context(), "event-t.never"); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("a stream never archived: %v", err)
	}
}

// TestSchemesRegistered: importing the package lets archive.Open reach
// s3://, gs:// and azblob:// (opening fails for want of credentials or a
// bucket, never for an unknown scheme).
func TestSchemesRegistered(t *testing.T) {
	if _, err := archive.Open(t.Context(), "ftp://x", nil); err == nil {
		t.Fatal("an unknown scheme opened")
	}
	for _, u := range []string{"s3://b?region=eu-west-1", "gs://b", "azblob://c"} {
		a, err := archive.Open(t.Context(), u, nil)
		if err == nil {
			_ = a.Close()
			continue
		}
		if strings.Contains(err.Error(), "no bucket of scheme") {
			t.Errorf("%s: %v", u, err)
		}
	}
}
