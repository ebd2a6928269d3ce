package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// TestSettleHonoursTheCallersDeadline: a member asked to wait for a
// position its projections do not reach answers when what was left of the
// asking call's deadline has passed, not after its own, longer, request
// timeout.
func TestSettleHonoursTheCallersDeadline(t *testing.T) {
	fs, quiet := vfs.NewMem(), slog.New(slog.DiscardHandler)
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r, err := projections.Open(l, projections.Config{Dir: "projections", FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s := &settlement{runner: r, timeout: time.Minute, logger: quiet}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout) // as Serve gives it
	defer cancel()
	start := time.Now()
	out := s.serve(ctx, &internalv1.WaitApplied{Commit: 1 << 40, WaitMs: 200})
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("answered after %v: the asking call's 200 ms deadline was not honoured", took)
	}
	if a, ok := out.(*internalv1.Applied); !ok || a.GetError() == "" {
		t.Fatalf("answered %v, want an error: the position was never reached", out)
	}
}
