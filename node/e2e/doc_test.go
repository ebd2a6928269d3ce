// Package e2e_test drives whole Hookline nodes in-process (node.Server)
// through their control API, with httptest receivers on loopback: the
// delivery engine's end-to-end behaviour and the rotation overlap with an
// injected clock. These tests live in their own package so that they run in
// a test process of their own, apart from the cluster package's multi-node
// tests: protoactor-go keeps process-wide state that races under -race when
// nodes of different tests meet in one process.
package e2e_test

import (
	"log/slog"
	"os"
)

// testLogger shows warnings on stderr; set HOOKLINE_TEST_DEBUG=1 to see
// everything.
func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("HOOKLINE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
