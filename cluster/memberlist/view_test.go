package memberlist

import (
	"fmt"
	"sync"
	"testing"

	hml "github.com/hashicorp/memberlist"
)

// TestViewCopiesNodes: the view follows joins, updates and leaves, and
// what it returns stays whole while memberlist rewrites its own node
// record in place under its lock, as it does when a node gossips new
// metadata (run with -race: reading memberlist's records is the race the
// view exists to avoid).
func TestViewCopiesNodes(t *testing.T) {
	events := make(chan hml.NodeEvent, 1024)
	v := newView(&hml.ChannelEventDelegate{Ch: events})
	var nodeLock sync.Mutex // memberlist's
	a := &hml.Node{Name: "a", Meta: []byte("a0")}
	b := &hml.Node{Name: "b", Meta: []byte("b0")}
	nodeLock.Lock()
	v.NotifyJoin(a)
	v.NotifyJoin(b)
	nodeLock.Unlock()

	const updates = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range updates {
			nodeLock.Lock()
			a.Meta = fmt.Appendf(nil, "a%d", i+1) // memberlist's aliveNode: state.Meta = a.Meta
			v.NotifyUpdate(a)
			nodeLock.Unlock()
		}
	}()
	for range updates {
		for _, n := range v.live() {
			if len(n.Meta) == 0 || n.Meta[0] != n.Name[0] {
				t.Fatalf("node %s read with meta %q", n.Name, n.Meta)
			}
		}
	}
	<-done
	got := v.live()
	if len(got) != 2 || got[0].Name != "a" || string(got[0].Meta) != fmt.Sprintf("a%d", updates) || got[1].Name != "b" {
		t.Fatalf("after the updates: %v", got)
	}

	nodeLock.Lock()
	v.NotifyLeave(b)
	nodeLock.Unlock()
	if got := v.live(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("after b left: %v", got)
	}
	if len(events) != 2+updates+1 {
		t.Errorf("the channel delegate got %d events, want %d", len(events), 2+updates+1)
	}
}
