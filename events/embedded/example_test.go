package embedded_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
)

func Example() {
	ctx := context.Background()
	// On disk, set Dir to the node's data directory and leave FS nil.
	l, err := embedded.Open(embedded.Config{Dir: "events", FS: vfs.NewMem()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	stream := events.EndpointStream("ep_1")
	created := events.Event{ID: events.NewID("cmd-1", stream), Type: "EndpointCreated", Data: []byte("...")}
	res, err := l.Append(ctx, stream, events.NoStream{}, created)
	fmt.Println(res.Revision, res.Position, err)

	// A retry of the same append is idempotent; another writer is fenced off.
	again, err := l.Append(ctx, stream, events.NoStream{}, created)
	fmt.Println(again == res, err)
	_, err = l.Append(ctx, stream, events.NoStream{}, events.Event{ID: events.NewID("cmd-2", stream), Type: "EndpointPaused"})
	fmt.Println(err)

	recs, err := l.ReadStream(ctx, stream, events.Forwards, 0, 10)
	fmt.Println(len(recs), recs[0].Type, err)
	// Output:
	// 0 1 <nil>
	// true <nil>
	// events: wrong expected revision on endpoint-ep_1: expected no stream, stream is at revision 0
	// 1 EndpointCreated <nil>
}
