package events

import (
	"time"

	"github.com/google/uuid"
)

// Event is an event to append. ID must be set; use [NewID] for a
// deterministic id so that a retried append is idempotent.
type Event struct {
	ID       uuid.UUID
	Type     string
	Data     []byte
	Metadata []byte
	// Partition is the delivery partition the event belongs to
	// (NoPartition for most); backends store it with the event and filter
	// subscriptions on it. A delivery stream's events all have their
	// endpoint's partition; an event stream holds EventPublished (none) and
	// one DeliveriesPlanned per partition it plans deliveries in.
	Partition Partition
}

// Record is an event as stored in the log.
type Record struct {
	Stream   string
	Revision Revision
	Position Position
	ID       uuid.UUID
	Type     string
	Data     []byte
	Metadata []byte
	Recorded time.Time
	// Partition is the event's delivery partition, as appended.
	Partition Partition
}

// AppendResult tells where an append landed: the revision of its last event
// and that event's position in the whole log.
type AppendResult struct {
	Revision Revision
	Position Position
}

// Filter narrows a subscription. A record passes when its stream starts with
// one of StreamPrefixes (or StreamPrefixes is empty), its type is one of
// Types (or Types is empty) and its partition is in Partitions (or
// Partitions is nil). The zero Filter passes everything.
type Filter struct {
	StreamPrefixes []string
	Types          []string
	// Partitions, when set, passes only the records of these partitions;
	// include NoPartition to pass the records of none.
	Partitions *PartitionSet
}

// Match reports whether r passes f.
func (f Filter) Match(r *Record) bool {
	return f.MatchPartition(r.Partition) && f.MatchStream(r.Stream) && f.MatchType(r.Type)
}

// MatchPartition reports whether a record of partition p passes f's
// partitions.
func (f Filter) MatchPartition(p Partition) bool {
	return f.Partitions == nil || f.Partitions.Has(p)
}

// MatchStream reports whether a stream name passes f's prefixes.
func (f Filter) MatchStream(stream string) bool {
	if len(f.StreamPrefixes) == 0 {
		return true
	}
	for _, p := range f.StreamPrefixes {
		if len(stream) >= len(p) && stream[:len(p)] == p {
			return true
		}
	}
	return false
}

// MatchType reports whether an event type passes f's types.
func (f Filter) MatchType(typ string) bool {
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if t == typ {
			return true
		}
	}
	return false
}

// IsZero reports whether f passes everything.
func (f Filter) IsZero() bool {
	return len(f.StreamPrefixes) == 0 && len(f.Types) == 0 && f.Partitions == nil
}
