// Package pause holds the one context-aware sleep that Hookline's retry
// and polling loops share, so that each loop does not carry its own copy
// of the timer and select.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends, whichever comes first. It returns nil
// after a full wait and ctx's error when ctx ended it. It paces backoff
// and polling; nothing should rely on it to synchronise.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
