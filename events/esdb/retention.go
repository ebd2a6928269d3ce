package esdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/hookline/hookline/events"
)

// setRetention gives stream the $maxAge of the configured retention, unless
// its metadata stream already exists. It runs before an append that may
// create an expiring stream, so that no event ever lands in such a stream
// without a $maxAge: a crash between the two writes leaves only a metadata
// stream whose stream was never written, never an event kept forever.
//
// The write expects the metadata stream not to exist: once any metadata is
// set it answers "wrong expected version", which is success here, and the
// existing metadata (whoever set it) is left alone.
func (l *Log) setRetention(ctx context.Context, stream string) error {
	var meta kurrentdb.StreamMetadata
	meta.SetMaxAge(l.cfg.Retention)
	_, err := l.client.SetStreamMetadata(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: kurrentdb.NoStream{}}, meta)
	if err == nil {
		return nil
	}
	err = translate("set retention of", stream, events.NoStream{}, err)
	if errors.Is(err, events.ErrWrongRevision) {
		return nil
	}
	return fmt.Errorf("append %s: %w", stream, err)
}
