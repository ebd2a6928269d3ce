package attempt

import (
	"testing"
	"time"
)

// TestIdleCacheDropsIdleEntries: an entry unused for cacheIdleTTL is
// dropped and closed by the sweep that an addition runs (at most once per
// cacheSweepEvery); an entry in use stays; all takes out the rest.
func TestIdleCacheDropsIdleEntries(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var closed []string
	c := idleCache[string]{now: func() time.Time { return now }, drop: func(v string) { closed = append(closed, v) }}
	get := func(key string) string {
		t.Helper()
		v, err := c.get(key, func() (string, error) { return "v-" + key, nil })
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	get("old")
	get("busy")
	now = now.Add(cacheIdleTTL - time.Second)
	if get("busy") != "v-busy" {
		t.Fatal("a cached value was made again")
	}
	now = now.Add(2 * time.Second) // "old" idle for cacheIdleTTL+1s, "busy" for 2 s
	get("new")
	if c.len() != 2 || len(closed) != 1 || closed[0] != "v-old" {
		t.Fatalf("after the sweep: %d entries, closed %v; want busy and new, old closed", c.len(), closed)
	}
	// The next sweep waits cacheSweepEvery, whatever is idle.
	now = now.Add(cacheIdleTTL)
	get("newer")
	if c.len() != 1 || len(closed) != 3 {
		t.Fatalf("a sweep %v later: %d entries, closed %v", cacheIdleTTL, c.len(), closed)
	}
	c.close(c.all())
	if c.len() != 0 || len(closed) != 4 {
		t.Fatalf("after all: %d entries, closed %v", c.len(), closed)
	}
}
