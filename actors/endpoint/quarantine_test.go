package endpoint_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookline/hookline/actors/endpoint"
)

func TestQuarantineBackoff(t *testing.T) {
	q := endpoint.NewQuarantine(2*time.Second, 10*time.Second)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if got := q.Until("ep", t0); !got.IsZero() {
		t.Fatalf("fresh endpoint quarantined until %v", got)
	}
	steps := []struct {
		lostAt time.Time
		want   time.Duration
	}{
		{t0, 2 * time.Second},
		{t0.Add(3 * time.Second), 4 * time.Second},
		{t0.Add(8 * time.Second), 8 * time.Second},
		{t0.Add(17 * time.Second), 10 * time.Second}, // capped
	}
	for i, s := range steps {
		q.Lost("ep", s.lostAt)
		if got := q.Until("ep", s.lostAt); !got.Equal(s.lostAt.Add(s.want)) {
			t.Fatalf("loss %d: quarantined until %v, want %v", i+1, got, s.lostAt.Add(s.want))
		}
		if got := q.Until("other", s.lostAt); !got.IsZero() {
			t.Fatalf("another endpoint is quarantined")
		}
	}
	end := steps[len(steps)-1].lostAt.Add(10 * time.Second)
	if got := q.Until("ep", end); !got.IsZero() {
		t.Fatalf("still quarantined at the end of its backoff: %v", got)
	}
	// Quiet for longer than the maximum: the backoff starts over.
	later := end.Add(11 * time.Second)
	q.Lost("ep", later)
	if got := q.Until("ep", later); !got.Equal(later.Add(2 * time.Second)) {
		t.Fatalf("after a quiet spell: until %v, want base backoff", got)
	}
}

// TestQuarantinePrunes: endpoints that lost ownership long ago are
// forgotten even if nobody asks about them again: the quarantine holds
// only recent losses. Before, an endpoint was forgotten only when Until
// was asked for it.
func TestQuarantinePrunes(t *testing.T) {
	q := endpoint.NewQuarantine(time.Second, 2*time.Second)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		q.Lost(fmt.Sprint("ep_", i), t0.Add(time.Duration(i)*time.Second))
	}
	if n := q.Len(); n > 5 {
		t.Fatalf("the quarantine holds %d endpoints after 1000 losses spread over 1000 s, want those of the last few seconds", n)
	}
}
