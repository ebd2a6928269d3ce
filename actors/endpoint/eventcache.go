package endpoint

import (
	"sync"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Bounds of the node's event cache.
const (
	eventCacheBytes   = 32 << 20 // payload bytes
	eventCacheEntries = 16_384   // events, whatever their size
)

// eventCache keeps the EventPublished of recent events for all the endpoint
// grains of a node: an event fanned out to n endpoints is read from the log
// once instead of n times, and a new delivery whose event is cached is
// attempted without any read. An event stream's EventPublished never
// changes (the stream is created with it, with expected revision NoStream),
// so a cached one is always right. The oldest entries go first once the
// payloads exceed the byte budget or the entries their bound (many small
// events cost their keys and messages, not payload bytes). Safe for
// concurrent use; the cached messages are shared and must not be modified.
type eventCache struct {
	mu    sync.Mutex // guards the fields below
	byKey map[string]*hooklinev1.EventPublished
	order []string // keys, oldest first, from head
	head  int
	bytes int // payload bytes held
	max   int
	most  int // entries
}

func newEventCache(maxBytes, maxEntries int) *eventCache {
	return &eventCache{byKey: map[string]*hooklinev1.EventPublished{}, max: maxBytes, most: maxEntries}
}

// get returns the cached event of an event stream, nil if none.
func (c *eventCache) get(stream string) *hooklinev1.EventPublished {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[stream]
}

// put caches the event of an event stream.
func (c *eventCache) put(stream string, ev *hooklinev1.EventPublished) {
	n := len(ev.GetPayload())
	if c == nil || n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[stream]; ok {
		return
	}
	for (c.bytes+n > c.max || len(c.byKey) >= c.most) && c.head < len(c.order) {
		old := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		c.bytes -= len(c.byKey[old].GetPayload())
		delete(c.byKey, old)
	}
	if c.head > len(c.order)/2 { // reuse the front of the slice
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	c.byKey[stream] = ev
	c.order = append(c.order, stream)
	c.bytes += n
}
