package filter

import "sync"

// Cache keeps the compiled filter of each (endpoint, config version), so
// that a publish compiles nothing: an endpoint's filter is compiled once
// per node and version, at its first publish. It is safe for concurrent
// use; the zero value is an empty cache, ready to use.
type Cache struct {
	mu sync.Mutex // guards m
	m  map[cacheKey]cached
}

type cacheKey struct {
	endpoint string
	version  int64
}

type cached struct {
	src string
	f   *Filter
	err error
}

// maxCached bounds the filters kept: beyond it the cache starts over.
const maxCached = 50_000

// Get returns the filter of src, the filter of endpoint at config version,
// compiled at most once. A src that does not compile (it passed Compile
// when it was set, so only a newer, stricter build can refuse it) gives
// its error every time, and is cached too.
func (c *Cache) Get(endpoint string, version int64, src string) (*Filter, error) {
	k := cacheKey{endpoint, version}
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && e.src == src {
		return e.f, e.err
	}
	f, err := Compile(src)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[cacheKey]cached{}
	}
	c.m[k] = cached{src: src, f: f, err: err}
	c.mu.Unlock()
	return f, err
}
