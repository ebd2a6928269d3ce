package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookline/hookline/events"
)

// errScanned ends a scan's subscription once it has read up to its head.
var errScanned = errors.New("reconcile: scanned up to the head")

// scan calls fn with every record of the log that passes filter, in
// position order, from the start up to head (included). A record fn cannot
// decode is an error: the log is the truth, and a record of a type this
// build does not know is reported, not skipped.
func scan(ctx context.Context, log events.Log, head events.Position, filter events.Filter, fn func(rec *events.Record) error) error {
	if head.IsStart() {
		return nil
	}
	err := log.Subscribe(ctx, events.Start, filter, func(recs []events.Record, through events.Position) error {
		for i := range recs {
			if head.Less(recs[i].Position) {
				return errScanned
			}
			if err := fn(&recs[i]); err != nil {
				return err
			}
		}
		if !through.Less(head) {
			return errScanned
		}
		return nil
	})
	if errors.Is(err, errScanned) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the log up to %s: %w", head, err)
	}
	return nil
}

// lastPosition returns the position of the last record of stream; Start
// when the stream does not exist.
func lastPosition(ctx context.Context, log events.Log, stream string) (events.Position, error) {
	recs, err := log.ReadStream(ctx, stream, events.Backwards, events.End, 1)
	if errors.Is(err, events.ErrStreamNotFound) || (err == nil && len(recs) == 0) {
		return events.Start, nil
	}
	if err != nil {
		return events.Start, fmt.Errorf("read %s: %w", stream, err)
	}
	return recs[0].Position, nil
}

// readOne reads the record of stream at from, going dir: its first with
// (Forwards, 0), its last with (Backwards, End).
func readOne(ctx context.Context, log events.Log, stream string, dir events.Direction, from events.Revision) (*events.Record, error) {
	recs, err := log.ReadStream(ctx, stream, dir, from, 1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("read %s: %w", stream, events.ErrStreamNotFound)
	}
	return &recs[0], nil
}

// movedPast reports whether any of streams has a record after head: what
// decides a comparison moved while the run looked.
func movedPast(ctx context.Context, log events.Log, head events.Position, streams ...string) (bool, error) {
	for _, s := range streams {
		last, err := lastPosition(ctx, log, s)
		if err != nil {
			return false, err
		}
		if head.Less(last) {
			return true, nil
		}
	}
	return false, nil
}
