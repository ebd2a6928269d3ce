package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// TestSettleHonoursTheCallersDeadline: a member asked to wait for a
// position its projections do not reach answers when what was left of the
// asking call's deadline has passed, not after its own, longer, request
// timeout.
func TestSettleHonoursTheCallersDeadline(t *testing.T) {
	_, r := memLogAndRunner(t)
	s := &settlement{runner: r, timeout: time.Minute, logger: slog.New(slog.DiscardHandler)}
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
