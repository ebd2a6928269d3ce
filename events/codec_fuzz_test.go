package events_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
)

// FuzzDecode decodes arbitrary records, as a reader of a log written by
// anyone would: Decode never panics; a type it does not know is
// ErrUnknownType; what it decodes has the record's type as its own, and
// encodes and decodes again to an equal message (so a reader that rewrites
// an event keeps it). The seed corpus in testdata/fuzz/FuzzDecode holds
// real events of every stream category and malformed ones.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		r := &events.Record{Stream: "fuzz-1", Type: typ, Data: data}
		msg, err := events.Decode(r)
		if err != nil {
			if msg != nil {
				t.Fatalf("Decode returned a message and an error: %v", err)
			}
			return
		}
		if got := events.TypeOf(msg); got != typ {
			t.Fatalf("record of type %q decoded to %q", typ, got)
		}
		ev, err := events.Encode(msg, "fuzz", "fuzz-1")
		if err != nil {
			t.Fatalf("a decoded message does not encode: %v", err)
		}
		again, err := events.Decode(&events.Record{Stream: "fuzz-1", Type: ev.Type, Data: ev.Data})
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", typ, err)
		}
		if !proto.Equal(msg, again) {
			t.Fatalf("%s changed in a round trip:\n%v\n%v", typ, msg, again)
		}
	})
}

// TestDecodeUnknownTypeIsSentinel pins what FuzzDecode relies on.
func TestDecodeUnknownTypeIsSentinel(t *testing.T) {
	_, err := events.Decode(&events.Record{Stream: "x-1", Type: "NoSuchEvent"})
	if !errors.Is(err, events.ErrUnknownType) {
		t.Fatalf("Decode(NoSuchEvent) = %v, want ErrUnknownType", err)
	}
}
