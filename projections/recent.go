package projections

// Recent is a bounded map of the values a projection wrote last, by key,
// for its Apply to find again without reading the store: most deliveries
// are planned and settled within seconds, so the outcome finds its
// delivery here instead of two lookups in a large memtable. When full, it
// forgets an arbitrary entry. It is a write-through cache of the writer's
// side only: use it from Apply (and from Store.Update functions that keep
// it up to date) only, never from queries, which run concurrently. A batch
// that fails stops the runner, so the cache never outlives a write that was
// not committed. The zero value is not usable; see [NewRecent].
type Recent[V any] struct {
	max int
	m   map[string]V
}

// NewRecent returns a Recent holding at most max entries.
func NewRecent[V any](max int) *Recent[V] {
	return &Recent[V]{max: max, m: make(map[string]V, max)}
}

// Get returns the value last put under key, if it is remembered.
func (r *Recent[V]) Get(key string) (V, bool) {
	v, ok := r.m[key]
	return v, ok
}

// Put remembers v under key.
func (r *Recent[V]) Put(key string, v V) {
	if _, ok := r.m[key]; !ok && len(r.m) >= r.max {
		for k := range r.m {
			delete(r.m, k)
			break
		}
	}
	r.m[key] = v
}

// Forget drops key.
func (r *Recent[V]) Forget(key string) { delete(r.m, key) }
