package events_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	msg := &hooklinev1.TenantCreated{
		TenantId: "t_1",
		Name:     "Acme",
		Quota:    &hooklinev1.Quota{AttemptsPerSecond: 12.5, MaxInFlight: 7, Weight: 3},
		At:       timestamppb.New(timestamppb.Now().AsTime()),
	}
	ev, err := events.Encode(msg, "cmd-1", events.TenantStream("t_1"))
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if ev.Type != "TenantCreated" || ev.Type != events.TypeOf(msg) {
		t.Errorf("type = %q, want TenantCreated", ev.Type)
	}
	if want := events.NewID("cmd-1", events.TenantStream("t_1")); ev.ID != want {
		t.Errorf("id = %s, want NewID(cause, target) = %s", ev.ID, want)
	}
	var meta events.Metadata
	if err := json.Unmarshal(ev.Metadata, &meta); err != nil {
		t.Fatalf("metadata %q: %v", ev.Metadata, err)
	}
	if meta != (events.Metadata{ContentType: events.ContentType, Cause: "cmd-1"}) {
		t.Errorf("metadata = %+v", meta)
	}

	rec := &events.Record{Stream: events.TenantStream("t_1"), Type: ev.Type, Data: ev.Data, Metadata: ev.Metadata}
	got, err := events.Decode(rec)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !proto.Equal(got, msg) {
		t.Errorf("decoded %v, want %v", got, msg)
	}

	// Encoding is deterministic: the same message gives the same bytes.
	again, err := events.Encode(msg, "cmd-1", events.TenantStream("t_1"))
	if err != nil {
		t.Fatalf("encode again: %v", err)
	}
	if string(again.Data) != string(ev.Data) || again.ID != ev.ID {
		t.Error("encoding the same message twice gave different data or ids")
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		rec  events.Record
		want string
	}{
		{"UnknownType", events.Record{Stream: "s", Revision: 3, Type: "NoSuchEvent"}, `unknown event type "NoSuchEvent"`},
		{"BadBytes", events.Record{Stream: "s", Revision: 4, Type: "TenantCreated", Data: []byte{0xff, 0xff, 0xff}}, "s@4 (TenantCreated)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := events.Decode(&c.rec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestNewIDDeterministic(t *testing.T) {
	a := events.NewID("cause", "target")
	if b := events.NewID("cause", "target"); a != b {
		t.Errorf("NewID is not deterministic: %s then %s", a, b)
	}
	if a.Version() != 5 {
		t.Errorf("version %d, want a UUIDv5", a.Version())
	}
	others := map[string][2]string{
		"OtherCause":  {"cause2", "target"},
		"OtherTarget": {"cause", "target2"},
		// The separator keeps the boundary: ("ab", "c") is not ("a", "bc").
		"ShiftedBoundary": {"causet", "arget"},
	}
	for name, o := range others {
		if id := events.NewID(o[0], o[1]); id == a {
			t.Errorf("%s: NewID(%q, %q) = NewID(cause, target)", name, o[0], o[1])
		}
	}
}
