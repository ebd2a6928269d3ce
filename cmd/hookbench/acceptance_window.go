package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The acceptance run's windows (see ledger.disturbed): a duplicate is
// explained only by one of them between its two receipts, each timed from
// one kill or restart to when the node serves again:
//
//   - a node killed by its fault: from its exit to its restart answering
//     its health check as serving (restartKilled);
//   - a node restarted around a fault: from its stop to the same
//     (restartAll);
//   - a PostgreSQL restart: from its stop to every node accepting a
//     publish again (pgRestartWindow);
//   - a grain that stopped because an append's outcome was unknown to it
//     (unknown-outcome, and a log that went away): from the node's log line
//     for a second, the time its attempts in flight take to land; its next
//     activation attempts them again (grainStops).

// grainStopLine is the node's log line of a grain that stops because an
// append (of its own stream, or of a delivery's) failed in a way it cannot
// tell landed or not.
var grainStopLine = regexp.MustCompile(`^time=(\S+) .*msg="\w+ grain (?:append failed|cannot record a delivery event); stopping"`)

// grainStops is the node log's writer of an acceptance run: each line of
// a grain that stopped after a failed append enters a window in the
// ledger; every line goes on to next (nil: nowhere). Safe for concurrent
// use by the nodes' log readers.
type grainStops struct {
	ledger *ledger
	mu     sync.Mutex // guards next's writes
	next   io.Writer
}

// Write takes one line of a node's log (the node's reader writes a line
// per call).
func (g *grainStops) Write(p []byte) (int, error) {
	if m := grainStopLine.FindSubmatch(p); m != nil {
		if at, err := time.Parse(time.RFC3339Nano, string(m[1])); err == nil {
			g.ledger.disturbed("grain stopped after an append of unknown outcome", at, time.Time{})
		}
	}
	if g.next == nil {
		return len(p), nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.next.Write(p)
}

// pgProbeTenant is the tenant whose publishes show that the nodes serve
// after a PostgreSQL restart; it has no endpoint, so they plan nothing.
const pgProbeTenant = "pg_restart_probe"

// servedAgain waits until every node accepts a publish, which needs the
// log, and returns when the last did; probe numbers the publishes.
func (a *acceptance) servedAgain(ctx context.Context, probe int) (time.Time, error) {
	return servedAgain(ctx, a.apis, probe)
}

// servedAgain waits until every node of apis accepts a publish of
// pgProbeTenant (which must exist), and returns when the last did.
func servedAgain(ctx context.Context, apis []*API, probe int) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, recoverWithin)
	defer cancel()
	for i, api := range apis {
		ev := &controlv1.PublishRequest{EventId: fmt.Sprintf("probe_%d_node%d", probe, i+1), Type: "probe", Payload: []byte(`{}`)}
		for {
			_, err := api.PublishBatch(ctx, pgProbeTenant, []*controlv1.PublishRequest{ev})
			if err == nil {
				break
			}
			if sleepCtx(ctx, readyPoll) != nil {
				return time.Time{}, fmt.Errorf("node %d does not publish within %v of the PostgreSQL restart: %w", i+1, recoverWithin, err)
			}
		}
	}
	return time.Now(), nil
}
