package filter

import (
	"sync"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Event is what a filter sees of one published event.
type Event struct {
	Type          string
	ID            string
	Payload       []byte
	Headers       map[string]string
	SchemaVersion string
	ObjectID      string
	ContentType   string
	OccurredAt    time.Time
}

// EventOf returns what a filter sees of a published event.
func EventOf(p *hooklinev1.EventPublished) Event {
	return Event{
		Type: p.GetEventType(), ID: p.GetEventId(), Payload: p.GetPayload(), Headers: p.GetHeaders(),
		SchemaVersion: p.GetSchemaVersion(), ObjectID: p.GetObjectId(), ContentType: p.GetContentType(),
		OccurredAt: p.GetOccurredAt().AsTime(),
	}
}

// Input is one event made ready for every filter that looks at it: made
// once per publish, it parses the payload at most once, and only when a
// filter reads data. It is safe for concurrent use.
type Input struct {
	ev      Event
	once    sync.Once
	data    any
	headers map[string]string
}

var _ interpreter.Activation = (*Input)(nil)

// NewInput returns the Input of ev. ev's fields must not change while the
// Input is in use.
func NewInput(ev Event) *Input {
	h := ev.Headers
	if h == nil {
		h = map[string]string{}
	}
	return &Input{ev: ev, headers: h}
}

// ResolveName implements CEL's activation: the variables of package doc.
func (in *Input) ResolveName(name string) (any, bool) {
	switch name {
	case "type":
		return in.ev.Type, true
	case "id":
		return in.ev.ID, true
	case "data":
		return in.Data(), true
	case "headers":
		return in.headers, true
	case "schema_version":
		return in.ev.SchemaVersion, true
	case "object_id":
		return in.ev.ObjectID, true
	case "content_type":
		return in.ev.ContentType, true
	case "occurred_at":
		return in.ev.OccurredAt, true
	}
	return nil, false
}

// Parent implements CEL's activation: there is none.
func (*Input) Parent() interpreter.Activation { return nil }

// Data returns the payload parsed as JSON, or CEL's null when it is not
// JSON (a filter that reads a field of it then fails, and does not pass).
func (in *Input) Data() any {
	in.once.Do(func() {
		in.data = types.NullValue
		if v, err := parseJSON(in.ev.Payload); err == nil && v != nil {
			in.data = v
		}
	})
	return in.data
}
