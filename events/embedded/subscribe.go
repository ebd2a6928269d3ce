package embedded

import (
	"context"
	"fmt"

	"github.com/hookline/hookline/events"
)

// subscribeChunk is how many records of the log a subscriber reads from the
// store at a time, and so the largest batch it hands to fn.
const subscribeChunk = 512

// Subscribe calls fn with the events after from that pass filter, in
// position order and in batches, reading them from the store: first those
// already there, then each new commit as the writer announces it. See
// events.Log.
//
// There is no handover to get wrong between catch-up and live: both are the
// same loop reading the store after the last position seen. Before each read
// the subscriber takes the writer's commit channel; when the read finds
// nothing new it waits on that channel, which the writer closes after its
// next commit, so a commit that lands between the read and the wait is not
// missed, and an idle subscriber sleeps in a select and uses no CPU. A slow
// subscriber never holds the writer back: it reads the store at its own
// pace. Gaps left by retention are skipped like any key range.
func (l *Log) Subscribe(ctx context.Context, from events.Position, filter events.Filter, fn events.SubscribeFunc) error {
	seq := from.Commit
	buf := make([]events.Record, 0, subscribeChunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		wake := l.committed()
		recs, last, err := l.scan(seq, subscribeChunk, filter, buf[:0])
		if err != nil {
			return fmt.Errorf("subscribe after %d: %w", seq, err)
		}
		if last != seq {
			if err := fn(recs, position(last)); err != nil {
				return err
			}
			clear(recs) // let the payloads go while waiting
			seq = last
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.quit:
			return fmt.Errorf("subscribe after %d: %w", seq, events.ErrClosed)
		}
	}
}
