package main

import (
	"fmt"
	"testing"
	"time"
)

// TestGrainStopsWindow: a node's log line of a grain that stopped after an
// append of unknown outcome (to its stream or a delivery's) opens a window of a second from the time it
// logged: a duplicate whose receipts straddle it is explained, one a
// minute later is not; other lines open none and all reach the next
// writer.
func TestGrainStopsWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	l := newLedger()
	var forwarded int
	g := &grainStops{ledger: l, next: writerFunc(func(p []byte) (int, error) { forwarded++; return len(p), nil })}
	for _, line := range []string{
		`time=2026-12-01T10:00:05.250Z level=INFO msg="hookline serving" grpc_addr=127.0.0.1:7070 http_addr=127.0.0.1:8080`,
		`time=2026-12-01T10:00:05.500Z level=ERROR msg="endpoint grain append failed; stopping" endpoint_id=ep_1 error="append endpoint-ep_1: faults: append outcome unknown (injected: it landed, its acknowledgement was lost): context deadline exceeded"`,
		`time=2026-12-01T10:00:30.000Z level=ERROR msg="endpoint grain cannot record a delivery event; stopping" endpoint_id=ep_2 delivery_id=dlv_1 error="append delivery-dlv_1: faults: append outcome unknown (injected: it landed, its acknowledgement was lost): context deadline exceeded"`,
	} {
		if _, err := fmt.Fprintln(g, line); err != nil {
			t.Fatal(err)
		}
	}
	if forwarded != 3 {
		t.Errorf("%d lines reached the next writer, want 3", forwarded)
	}
	for _, tc := range []struct {
		prev, next float64
		want       bool
	}{
		{5.4, 5.9, true},    // an attempt that landed as the grain stopped, again after
		{6.2, 7.0, true},    // one in flight for 0.7 s after the stop
		{4.0, 5.0, false},   // both before the stop
		{65.0, 66.0, false}, // a minute later
	} {
		if got := l.explains(at(tc.prev), at(tc.next)); got != tc.want {
			t.Errorf("receipts at %.1f s and %.1f s explained %v, want %v", tc.prev, tc.next, got, tc.want)
		}
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
