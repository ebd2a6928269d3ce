package attempt

import (
	"sync"
	"time"
)

// Caches of the egress client (OAuth2 tokens, client-certificate
// transports, broker connections) are keyed by endpoint and configuration
// version or by server and credentials, so a changed endpoint leaves its
// old entries behind. Each is an idleCache: an entry unused for
// cacheIdleTTL is dropped (and closed), in a sweep run at most once per
// cacheSweepEvery when an entry is added.
const (
	cacheIdleTTL    = 10 * time.Minute
	cacheSweepEvery = time.Minute
)

// idleCache maps keys to values made on first use and dropped when idle.
// It is safe for concurrent use.
type idleCache[V any] struct {
	mu      sync.Mutex
	entries map[string]*idleEntry[V]
	swept   time.Time
	// drop, when set, closes a value dropped from the cache; it runs
	// without the cache's lock.
	drop func(V)
	// now is the clock; nil means time.Now.
	now func() time.Time
}

type idleEntry[V any] struct {
	v    V
	used time.Time
}

func (c *idleCache[V]) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// get returns key's value, marking it used, or makes one with make (under
// the cache's lock, so make must not block on the network) and adds it.
func (c *idleCache[V]) get(key string, make func() (V, error)) (V, error) {
	now := c.clock()
	c.mu.Lock()
	if e := c.entries[key]; e != nil {
		e.used = now
		c.mu.Unlock()
		return e.v, nil
	}
	v, err := make()
	if err != nil {
		c.mu.Unlock()
		return v, err
	}
	if c.entries == nil {
		c.entries = map[string]*idleEntry[V]{}
	}
	c.entries[key] = &idleEntry[V]{v: v, used: now}
	dropped := c.sweepLocked(now)
	c.mu.Unlock()
	c.close(dropped)
	return v, nil
}

// replace sets key's value, returning the one it replaces (not closed).
func (c *idleCache[V]) replace(key string, v V) (old V, had bool) {
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*idleEntry[V]{}
	}
	if e := c.entries[key]; e != nil {
		old, had = e.v, true
	}
	c.entries[key] = &idleEntry[V]{v: v, used: now}
	return old, had
}

// sweepLocked takes out the entries idle for cacheIdleTTL, at most once
// per cacheSweepEvery.
func (c *idleCache[V]) sweepLocked(now time.Time) []V {
	if now.Sub(c.swept) < cacheSweepEvery {
		return nil
	}
	c.swept = now
	var out []V
	for key, e := range c.entries {
		if now.Sub(e.used) >= cacheIdleTTL {
			out = append(out, e.v)
			delete(c.entries, key)
		}
	}
	return out
}

// all takes out every entry, for closing.
func (c *idleCache[V]) all() []V {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]V, 0, len(c.entries))
	for key, e := range c.entries {
		out = append(out, e.v)
		delete(c.entries, key)
	}
	return out
}

// each calls f with every value, under the cache's lock.
func (c *idleCache[V]) each(f func(V)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		f(e.v)
	}
}

func (c *idleCache[V]) close(vs []V) {
	if c.drop == nil {
		return
	}
	for _, v := range vs {
		c.drop(v)
	}
}

// len is the number of entries.
func (c *idleCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
