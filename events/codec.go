package events

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// Registers the event messages, so Decode can find them by name.
	_ "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// ContentType is the content type of every event's data.
const ContentType = "application/protobuf"

// protoPackage is the protobuf package of the event messages; an event's
// type is its message's short name (EventPublished, AttemptFailed, ...).
const protoPackage = "hookline.v1."

// namespace roots the deterministic event ids.
var namespace = uuid.MustParse("5b1f6c1e-3f0e-4c39-9a57-6f8e0a3c1d42")

// NewID returns the deterministic id of the event that cause produces for
// target: a UUIDv5, so re-running the same step yields the same id and a
// retried append is idempotent. cause names what made the event (a command id,
// a delivery attempt "d_…/3"); target names what it is about (a stream, an
// event type).
func NewID(cause, target string) uuid.UUID {
	return uuid.NewSHA1(namespace, []byte(cause+"\x00"+target))
}

// Metadata travels beside an event's data. It is JSON so that the
// EventStoreDB UI shows it readably.
type Metadata struct {
	// ContentType of the data; always [ContentType] for Hookline's events.
	ContentType string `json:"content_type"`
	// Cause is the cause given to [NewID].
	Cause string `json:"cause,omitempty"`
}

// Encode turns a message into an Event whose id is NewID(cause, target) and
// whose type is the message's short name.
func Encode(msg proto.Message, cause, target string) (Event, error) {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s: %w", msg.ProtoReflect().Descriptor().Name(), err)
	}
	meta, err := json.Marshal(Metadata{ContentType: ContentType, Cause: cause})
	if err != nil {
		return Event{}, fmt.Errorf("encode metadata: %w", err)
	}
	return Event{
		ID:       NewID(cause, target),
		Type:     string(msg.ProtoReflect().Descriptor().Name()),
		Data:     data,
		Metadata: meta,
	}, nil
}

// EncodeIn is [Encode] for an event of delivery partition p.
func EncodeIn(msg proto.Message, cause, target string, p Partition) (Event, error) {
	ev, err := Encode(msg, cause, target)
	ev.Partition = p
	return ev, err
}

// TypeOf returns the event type of a message, its short name.
func TypeOf(msg proto.Message) string { return string(msg.ProtoReflect().Descriptor().Name()) }

// ErrUnknownType means a record's type names no event message of this
// build: written by a newer version, or not Hookline's. Readers may skip it.
var ErrUnknownType = errors.New("events: unknown event type")

// Decode returns the message that a record holds, by its type. A type this
// build does not know fails with an error wrapping [ErrUnknownType].
func Decode(r *Record) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(protoPackage + r.Type))
	if err != nil {
		return nil, fmt.Errorf("decode %s@%d: %w %q", r.Stream, r.Revision, ErrUnknownType, r.Type)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(r.Data, msg); err != nil {
		return nil, fmt.Errorf("decode %s@%d (%s): %w", r.Stream, r.Revision, r.Type, err)
	}
	return msg, nil
}
