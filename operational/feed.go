package operational

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Name is the feed's projection name.
const Name = "operational"

// DefaultMaxAge is how old a cause may be and still be emitted: a day,
// the span of a delivery's automatic retries.
const DefaultMaxAge = 24 * time.Hour

// Config configures a [Feed]. The zero value is valid.
type Config struct {
	// MaxAge is how long after its cause an operational event may still be
	// emitted. A cause older than that when the feed applies it (a
	// rebuild of the store, a partition caught up from far behind) is
	// passed over, and an entry older than that is dropped from the
	// outbox. 0 means DefaultMaxAge.
	MaxAge time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	if c.MaxAge < 0 {
		return errors.New("operational config: max age must not be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.MaxAge = cmp.Or(c.MaxAge, DefaultMaxAge)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Feed is the projection that turns causes in the log into entries of an
// outbox, by delivery partition: the operational events an [Emitter]
// publishes. It is [projections.Partitioned]: it applies the delivery
// records of the node's partitions (terminal failures) and the records of
// no partition (endpoint streams), and knows which partitions are live
// here, whose entries this node emits. Create it with [NewFeed]; it is
// safe for concurrent use.
//
// Keys (under the projection's prefix):
//
//	e{endpoint_id}                   present while the endpoint is operational
//	o{partition u16}{commit}{prepare} one outbox entry: an Event as JSON
type Feed struct {
	store *projections.Store
	cfg   Config

	mu   sync.Mutex // guards live
	live events.PartitionSet

	// added is signalled after a commit that added entries, or when the
	// live partitions change.
	added chan struct{}
}

var _ projections.Partitioned = (*Feed)(nil)

// NewFeed registers a feed with the runner r.
func NewFeed(r *projections.Runner, cfg Config) (*Feed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Feed{cfg: cfg.withDefaults(), added: make(chan struct{}, 1)}
	return projections.Registered(r, f, func(s *projections.Store) { f.store = s })
}

// Name implements projections.Projection.
func (*Feed) Name() string { return Name }

// Filter implements projections.Projection: the causes, and the endpoint
// events that say whether an endpoint is operational.
func (*Feed) Filter() events.Filter {
	return events.Filter{
		StreamPrefixes: []string{events.EndpointCategory + "-", events.DeliveryCategory + "-"},
		Types: []string{
			"EndpointCreated", "EndpointUpdated", "EndpointDeleted",
			"EndpointPaused", "CircuitOpened", "CircuitClosed", "RecoveryFinished", "SecretRotated", "SecretRetired",
			"AttemptFailed", "DeliveryExpired",
		},
	}
}

// PartitionsChanged implements projections.Partitioned.
func (f *Feed) PartitionsChanged(live events.PartitionSet) {
	f.mu.Lock()
	f.live = live
	f.mu.Unlock()
	f.signal()
}

// Live returns the partitions whose entries this node emits.
func (f *Feed) Live() events.PartitionSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

// Added is signalled (it never closes) when entries were added or the live
// partitions changed.
func (f *Feed) Added() <-chan struct{} { return f.added }

func (f *Feed) signal() {
	select {
	case f.added <- struct{}{}:
	default:
	}
}

// Apply implements projections.Projection.
func (f *Feed) Apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	switch m := msg.(type) {
	case *hooklinev1.EndpointCreated:
		return f.track(b, m.GetEndpointId(), m.GetConfig().GetEventTypes())
	case *hooklinev1.EndpointUpdated:
		return f.track(b, m.GetEndpointId(), m.GetConfig().GetEventTypes())
	case *hooklinev1.EndpointDeleted:
		return b.Delete(endpointKey(m.GetEndpointId()))
	}
	ev, ok := Of(rec, msg)
	if !ok {
		return nil
	}
	if f.cfg.Now().Sub(rec.Recorded) > f.cfg.MaxAge {
		return nil // too late to tell anyone
	}
	// The loop guard: nothing about an operational endpoint.
	if _, op, err := b.Get(endpointKey(ev.EndpointID)); err != nil || op {
		return err
	}
	v, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode operational event: %w", err)
	}
	if err := b.Set(outboxKey(events.PartitionOf(ev.EndpointID), rec.Position), v); err != nil {
		return err
	}
	b.OnCommit(f.signal)
	return nil
}

// track remembers whether an endpoint is operational.
func (f *Feed) track(b *projections.Batch, endpointID string, eventTypes []string) error {
	if IsEndpoint(eventTypes) {
		return b.Set(endpointKey(endpointID), nil)
	}
	return b.Delete(endpointKey(endpointID))
}

func endpointKey(id string) []byte { return projections.AppendString([]byte{'e'}, id) }

// outboxPrefix starts every outbox key.
const outboxPrefix = 'o'

func outboxKey(p events.Partition, pos events.Position) []byte {
	k := binary.BigEndian.AppendUint16([]byte{outboxPrefix}, uint16(p))
	k = projections.AppendUint64(k, pos.Commit)
	return projections.AppendUint64(k, pos.Prepare)
}

// entry is one outbox entry as the emitter reads it.
type entry struct {
	key  []byte
	part events.Partition
	ev   Event
}

// entries reads up to max entries of the live partitions, partition by
// partition, each in the order of its causes in the log.
func (f *Feed) entries(live events.PartitionSet, max int) ([]entry, error) {
	var out []entry
	var err error
	live.Each(func(p events.Partition) {
		if err != nil || len(out) >= max || p == events.NoPartition {
			return
		}
		lo, hi := partitionRange(p)
		err = f.scan(lo, hi, func(key []byte, ev Event) bool {
			out = append(out, entry{key: key, part: p, ev: ev})
			return len(out) < max
		})
	})
	return out, err
}

// stale returns the keys of the entries older than MaxAge, in every
// partition: those of partitions another node emits (this node applied
// their causes too: they are endpoint events, which every node applies),
// and those that could not be published in time.
func (f *Feed) stale() ([][]byte, error) {
	now := f.cfg.Now()
	var keys [][]byte
	err := f.scan([]byte{outboxPrefix}, []byte{outboxPrefix + 1}, func(key []byte, ev Event) bool {
		if now.Sub(ev.Recorded) > f.cfg.MaxAge {
			keys = append(keys, key)
		}
		return true
	})
	return keys, err
}

// scan calls fn with the outbox entries in [lo, hi) until fn returns false.
func (f *Feed) scan(lo, hi []byte, fn func(key []byte, ev Event) bool) error {
	err := f.store.Scan(lo, hi, func(key, value []byte) (bool, error) {
		var ev Event
		if err := json.Unmarshal(value, &ev); err != nil {
			return false, fmt.Errorf("decode entry: %w", err)
		}
		return fn(bytes.Clone(key), ev), nil
	})
	if err != nil {
		return fmt.Errorf("read outbox: %w", err)
	}
	return nil
}

// remove deletes outbox entries.
func (f *Feed) remove(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	return f.store.Update(func(b *projections.Batch) error {
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// Pending returns how many entries the outbox holds, in every partition.
func (f *Feed) Pending() (int, error) {
	n := 0
	err := f.store.Scan([]byte{outboxPrefix}, []byte{outboxPrefix + 1}, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// partitionRange is the key range of partition p's outbox entries.
func partitionRange(p events.Partition) (lo, hi []byte) {
	return binary.BigEndian.AppendUint16([]byte{outboxPrefix}, uint16(p)),
		binary.BigEndian.AppendUint16([]byte{outboxPrefix}, uint16(p)+1)
}

// PendingIn returns how many entries partition p's outbox holds: a node
// that hands p over waits until it has emitted them.
func (f *Feed) PendingIn(p events.Partition) (int, error) {
	lo, hi := partitionRange(p)
	n := 0
	err := f.store.Scan(lo, hi, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// Forget drops partition p's entries whose cause comes before pos in the
// log or was recorded before olderThan, and returns how many it dropped. A
// node that starts serving p calls it: before a hand-over's position the
// previous owner emitted everything (it waits for that before it hands p
// over); after a crash it may not have, and only the recent entries are
// kept for emitting again (a repeat is answered as a duplicate), not the
// day of causes a standby has kept.
func (f *Feed) Forget(p events.Partition, pos events.Position, olderThan time.Time) (int, error) {
	lo, hi := partitionRange(p)
	cut := outboxKey(p, pos)
	var keys [][]byte
	err := f.scan(lo, hi, func(key []byte, ev Event) bool {
		if bytes.Compare(key, cut) < 0 || ev.Recorded.Before(olderThan) {
			keys = append(keys, key)
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	return len(keys), f.remove(keys)
}
