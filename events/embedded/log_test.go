package embedded_test

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/events/eventstest"
)

// testMaxEventSize is small, so the suite's size case stays cheap.
const testMaxEventSize = 64 << 10

func open(t *testing.T, cfg embedded.Config) *embedded.Log {
	t.Helper()
	l, err := embedded.Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, events.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// TestConformanceDisk runs the suite on one log on disk, shared by every
// case, as a server would be.
func TestConformanceDisk(t *testing.T) {
	l := open(t, embedded.Config{Dir: t.TempDir(), MaxEventSize: testMaxEventSize})
	eventstest.Run(t, eventstest.Harness{
		New:          func(*testing.T) events.Log { return l },
		MaxEventSize: testMaxEventSize,
	})
}

// TestConformanceMem runs the suite on a fresh in-memory log per case, which
// the suite owns and may close.
func TestConformanceMem(t *testing.T) {
	eventstest.Run(t, eventstest.Harness{
		New: func(t *testing.T) events.Log {
			return open(t, embedded.Config{Dir: "db", FS: vfs.NewMem(), MaxEventSize: testMaxEventSize})
		},
		MaxEventSize: testMaxEventSize,
		Owned:        true,
	})
}
