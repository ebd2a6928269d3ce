package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestForWaitsTheFullDuration(t *testing.T) {
	start := time.Now()
	if err := For(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("For = %v, want nil after a full wait", err)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("For returned after %s, want at least 20ms", took)
	}
}

func TestForEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("For = %v, want context.Canceled", err)
	}
}
