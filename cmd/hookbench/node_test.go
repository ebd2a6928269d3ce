package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// onLine calls do once, the first time a line holding match is written.
type onLine struct {
	match string
	once  sync.Once
	do    func()
}

func (w *onLine) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.match)) {
		w.once.Do(w.do)
	}
	return len(p), nil
}

// A node restarted while another process holds its gossip port starts once
// the port is free again, on the same address; if the port stays taken, it
// starts on a new one rather than failing the run.
func TestNodeRestartPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the hookline binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex
		taken net.Listener
	)
	release := func() {
		mu.Lock()
		defer mu.Unlock()
		if taken != nil {
			taken.Close()
			taken = nil
		}
	}
	log := &onLine{match: "address already in use", do: release}
	n, err := StartNode(ctx, NodeConfig{Binary: hooklineBinary(t), DataDir: t.TempDir(), AdminToken: "hbk_test_restart_port", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(10 * time.Second)
	first := n.GossipAddr()
	take := func() net.Listener {
		t.Helper()
		if err := n.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", first)
		if err != nil {
			t.Fatalf("take the node's gossip address %s: %v", first, err)
		}
		return l
	}

	// Released when the node says it could not listen: the restart retries.
	l := take()
	mu.Lock()
	taken = l
	mu.Unlock()
	if err := n.Restart(ctx); err != nil {
		t.Fatalf("restart after the port was freed: %v", err)
	}
	if got := n.GossipAddr(); got != first {
		t.Errorf("gossip address after the port was freed = %s, want the same %s", got, first)
	}
	mu.Lock()
	stillTaken := taken != nil
	mu.Unlock()
	if stillTaken {
		t.Fatal("the node started without ever finding its port taken: the test took the wrong address")
	}

	// Held throughout (log's one call is spent): the node starts on a new
	// address.
	held := take()
	defer held.Close()
	if err := n.Restart(ctx); err != nil {
		t.Fatalf("restart while the port stays taken: %v", err)
	}
	if got := n.GossipAddr(); got == first || !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("gossip address while the old one is taken = %q, want a new loopback address", got)
	}
}
