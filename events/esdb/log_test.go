package esdb_test

import (
	"context"
	"os"
	"testing"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/esdb"
	"github.com/hookline/hookline/events/eventstest"
)

// suiteMaxEventSize is the cap that the suite runs with: half a MiB, so that
// its largest event (exactly the cap, plus its type) fits within a server's
// default 1 MiB MaxAppendSize, whether or not the server is the one of
// docker/compose.esdb.yaml, which raises it for the production default.
const suiteMaxEventSize = 512 << 10

// TestConformance runs the events.Log suite against the server at
// HOOKLINE_ESDB_URL; docker/compose.esdb.yaml starts one.
func TestConformance(t *testing.T) {
	url := os.Getenv("HOOKLINE_ESDB_URL")
	if url == "" {
		t.Skip("HOOKLINE_ESDB_URL not set: skipping the EventStoreDB conformance suite (set it to e.g. kurrentdb://localhost:2113?tls=false to run it)")
	}
	eventstest.Run(t, eventstest.Harness{
		New: func(t *testing.T) events.Log {
			l, err := esdb.Open(context.Background(), esdb.Config{ConnectionString: url, MaxEventSize: suiteMaxEventSize})
			if err != nil {
				t.Fatalf("open %s: %v", url, err)
			}
			t.Cleanup(func() { _ = l.Close() }) // the Closed case closes it first
			return l
		},
		MaxEventSize: suiteMaxEventSize,
		Owned:        true,
	})
}
