package endpoint

import (
	"fmt"
	"testing"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

func TestEventCacheEvictsOldestOverBudget(t *testing.T) {
	c := newEventCache(30, 100)
	ev := func(n int) *hooklinev1.EventPublished { return &hooklinev1.EventPublished{Payload: make([]byte, n)} }
	for i := range 3 {
		c.put(fmt.Sprint(i), ev(10))
	}
	c.put("big", ev(31)) // over the whole budget: not cached
	if c.get("big") != nil {
		t.Errorf("an event larger than the budget was cached")
	}
	for i := range 3 {
		if c.get(fmt.Sprint(i)) == nil {
			t.Errorf("event %d missing within the budget", i)
		}
	}
	c.put("3", ev(15))
	if c.get("0") != nil || c.get("1") != nil {
		t.Errorf("the oldest events were kept over the budget")
	}
	if c.get("2") == nil || c.get("3") == nil {
		t.Errorf("the newest events were evicted")
	}
	if c.bytes != 25 {
		t.Errorf("bytes = %d, want 25", c.bytes)
	}
	// The entry bound holds whatever the payloads weigh.
	few := newEventCache(1<<20, 2)
	for i := range 5 {
		few.put(fmt.Sprint(i), ev(0))
	}
	if len(few.byKey) != 2 || few.get("3") == nil || few.get("4") == nil {
		t.Errorf("entries %d, want the newest 2", len(few.byKey))
	}
	var nilCache *eventCache
	nilCache.put("x", ev(1))
	if nilCache.get("x") != nil {
		t.Errorf("a nil cache returned an event")
	}
}
