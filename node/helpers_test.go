package node_test

import (
	"log/slog"
	"os"
	"time"

	"github.com/hookline/hookline/cluster/memberlist"
)

// testLogger shows warnings (protoactor's included) on stderr; set
// HOOKLINE_TEST_DEBUG=1 to see everything.
func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("HOOKLINE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// fastGossip detects a dead member within about a second on loopback.
var fastGossip = memberlist.Timing{
	ProbeInterval:  200 * time.Millisecond,
	ProbeTimeout:   100 * time.Millisecond,
	GossipInterval: 50 * time.Millisecond,
	SuspicionMult:  2,
	LeaveTimeout:   time.Second,
}
