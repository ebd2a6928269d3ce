package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookline/hookline/projections/due"
)

// noDue is a due index with nothing due.
type noDue struct{}

func (noDue) Pull(string, time.Time, int) ([]due.Item, error) { return nil, nil }

// TestPullsForget: the pull tracker remembers the endpoints that pulled
// lately, not every endpoint that ever pulled on the node.
func TestPullsForget(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	p := newPulls(noDue{}, func() time.Time { return now })
	for i := range 1000 {
		if _, err := p.Pull(fmt.Sprintf("ep_%d", i), now, 10); err != nil {
			t.Fatal(err)
		}
	}
	now = t0.Add(time.Hour)
	if _, err := p.Pull("ep_0", now, 10); err != nil {
		t.Fatal(err)
	}
	if got := p.LastPull("ep_1"); !got.Equal(t0) {
		t.Fatalf("an hour on, ep_1 last pulled at %v, want %v", got, t0)
	}
	now = t0.Add(pullsKept + time.Minute)
	if _, err := p.Pull("ep_2", now, 10); err != nil {
		t.Fatal(err)
	}
	if got := p.LastPull("ep_2"); !got.Equal(now) {
		t.Fatalf("ep_2 last pulled at %v, want %v", got, now)
	}
	if got := p.LastPull("ep_0"); !got.Equal(t0.Add(time.Hour)) {
		t.Fatalf("ep_0 last pulled at %v, want an hour after t0", got)
	}
	p.mu.Lock()
	n := len(p.last)
	p.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d endpoints remembered, want 2 (those that pulled within %v)", n, pullsKept)
	}
}
