package projections_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookline/hookline/projections"
)

// TestCloseWithoutItsDirectory: a runner whose directory was removed under
// it (an operator's mistake, a test's cleanup) cannot flush what it holds;
// Close gives up after its flush timeout and says so, instead of waiting
// for a flush that can never succeed (the node's stop hung there). The
// lost state is applied again from the log at the next start.
func TestCloseWithoutItsDirectory(t *testing.T) {
	l := openLog(t)
	dir := filepath.Join(t.TempDir(), "projections")
	r, err := projections.Open(l, projections.Config{Dir: dir, CloseFlushTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(&counter{}); err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	waitFor(t, r, createTenants(t, l, 0, 50))
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		if err == nil {
			t.Fatal("Close of a runner without its directory reported no error")
		}
		t.Logf("Close: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30 s of a 1 s flush timeout")
	}
}
