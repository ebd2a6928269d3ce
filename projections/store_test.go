package projections_test

import (
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/projections"
)

// TestScan: a scan sees the keys under its prefix and no other, in key
// order, stops when its function says so, and returns its function's error.
func TestScan(t *testing.T) {
	r, err := projections.Open(openLog(t), projections.Config{Dir: "proj", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Register(&counter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b", "c\x00d", "e"}
	err = s.Update(func(b *projections.Batch) error {
		for _, id := range ids {
			if err := b.Set(projections.AppendString([]byte{'x'}, id), []byte(id)); err != nil {
				return err
			}
		}
		return errors.Join(b.Set([]byte{'w'}, nil), b.Set([]byte{'y'}, nil))
	})
	if err != nil {
		t.Fatal(err)
	}

	got, err := s.IDs([]byte{'x'})
	if err != nil || !slices.Equal(got, ids) {
		t.Errorf("IDs = %q, %v; want %q", got, err, ids)
	}
	var values []string
	err = s.ScanPrefix([]byte{'x'}, func(_, value []byte) (bool, error) {
		values = append(values, string(value))
		return len(values) < 2, nil
	})
	if err != nil || !slices.Equal(values, ids[:2]) {
		t.Errorf("scan stopped after two: %q, %v; want %q", values, err, ids[:2])
	}
	stop := errors.New("stop")
	err = s.Update(func(b *projections.Batch) error {
		return b.ScanPrefix([]byte{'x'}, func(_, _ []byte) (bool, error) { return true, stop })
	})
	if !errors.Is(err, stop) {
		t.Errorf("scan whose function fails returned %v, want %v", err, stop)
	}
}
