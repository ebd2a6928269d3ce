package control

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/status"
)

// TestNotReadyRefusedWhileServedElsewhere: a call that comes before the
// node is ready is refused at once with UNAVAILABLE while another member
// can serve it, to be retried there; with none, it waits for the node to
// be ready and goes on.
func TestNotReadyRefusedWhileServedElsewhere(t *testing.T) {
	var elsewhere atomic.Bool
	s := &Server{cfg: Config{ServedElsewhere: elsewhere.Load}, health: health.NewServer(), ready: make(chan struct{})}
	// Waiting, the call would end with its context (DeadlineExceeded),
	// before readyWait.
	ctx, cancel := context.WithTimeout(context.Background(), readyWait/2)
	defer cancel()

	elsewhere.Store(true)
	if err := s.awaitReady(ctx); status.Code(err) != codes.Unavailable {
		t.Fatalf("awaitReady with another member ready: %v; want UNAVAILABLE at once", err)
	}

	elsewhere.Store(false)
	done := make(chan error, 1)
	go func() { done <- s.awaitReady(ctx) }()
	for s.waiting.Load() == 0 { // the call is waiting (a poll, bounded by ctx)
		if ctx.Err() != nil {
			t.Fatal("the call never waited for the node")
		}
		time.Sleep(time.Millisecond)
	}
	s.Ready()
	if err := <-done; err != nil {
		t.Fatalf("awaitReady with no other member: %v; want it to wait for Ready and go on", err)
	}
}
