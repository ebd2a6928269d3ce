package command

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
)

// ReadStream reads stream forwards from its start, page events at a time,
// and calls apply with each event, decoded, and its revision, in order. A
// stream that does not exist reads as empty. The grains read their own
// streams with it, and the endpoint grain its deliveries' and recoveries'.
func ReadStream(ctx context.Context, log events.Log, stream string, page int, apply func(m proto.Message, rev events.Revision)) error {
	for from := events.Revision(0); ; {
		recs, err := log.ReadStream(ctx, stream, events.Forwards, from, page)
		if errors.Is(err, events.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", stream, err)
		}
		for i := range recs {
			msg, err := events.Decode(&recs[i])
			if err != nil {
				return err
			}
			apply(msg, recs[i].Revision)
		}
		if len(recs) < page {
			return nil
		}
		from = recs[len(recs)-1].Revision + 1
	}
}
