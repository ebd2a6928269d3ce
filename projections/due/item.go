package due

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Class orders due work: new deliveries come before any retry, both in an
// endpoint's pulls and for the node's attempt slots (package dispatch).
type Class uint8

const (
	// ClassNew is a delivery that has had no attempt yet.
	ClassNew Class = 0
	// ClassRetry is a delivery waiting for another attempt: an automatic retry or
	// a manual replay.
	ClassRetry Class = 1
)

func (c Class) String() string {
	if c == ClassNew {
		return "new"
	}
	return "retry"
}

// Item is one delivery that needs an attempt.
type Item struct {
	DeliveryID string
	TenantID   string
	EventID    string
	// EventType and ConfigVersion are empty for a manual replay of a
	// delivery that had already ended: ReplayRequested does not carry them,
	// and a replay uses the current configuration anyway.
	EventType     string
	EndpointID    string
	ConfigVersion int64
	Class         Class
	// Manual is set for a replay requested by a user.
	Manual bool
	// DueAt is when the attempt is due: the planned time for new work,
	// next_attempt_at for a retry, the request time for a replay.
	DueAt     time.Time
	PlannedAt time.Time
	// ExpiresAt ends automatic retries; zero when unknown (replays).
	ExpiresAt time.Time
	// Attempts counts the attempts made so far, as of the last failure.
	Attempts int32

	// Ordering, OrderingKey and Plan are set on a delivery that its
	// endpoint orders by key (see order.go): its event's key, and the log
	// position of its plan, which orders the key's deliveries. Sequence is
	// the webhook-sequence it was first sent with (from its attempts), 0
	// until then: the grain numbers a key's head when it first sends it
	// (see order_counter.go).
	Ordering    hooklinev1.KeyOrdering
	OrderingKey string
	Sequence    int64
	Plan        events.Position
	// Token and TokenKey are the key's token, set by [Due.Pull] on a head
	// it numbered (Sequence): not stored with the item.
	Token    []byte
	TokenKey string
	// Waiting says the delivery waits behind its key's head: it is not due
	// and no pull returns it.
	Waiting bool
}

// Ordered reports whether the delivery is attempted in its key's order.
func (it *Item) Ordered() bool {
	return it.Ordering != hooklinev1.KeyOrdering_KEY_ORDERING_NONE && it.OrderingKey != ""
}

// itemV1 starts an item's binary encoding; itemV2 one that may end with
// the ordering fields (flagOrdered): the ordering, key, sequence and plan
// position.
const (
	itemV1 = 1
	itemV2 = 2
)

// Flags of the binary encoding.
const (
	flagManual byte = 1 << iota
	flagDue
	flagPlanned
	flagExpires
	flagOrdered
	flagWaiting
)

var errShortItem = errors.New("due: truncated item")

// encodeItem appends it's binary encoding to buf: the version, the flags,
// the class, then the strings (length-prefixed), the config version and
// attempts (varints) and the non-zero times (Unix nanoseconds, varints).
// It is several times cheaper than JSON to write and to read, and every
// pull reads all the items it returns.
func encodeItem(buf []byte, it *Item) []byte {
	var flags byte
	if it.Manual {
		flags |= flagManual
	}
	if !it.DueAt.IsZero() {
		flags |= flagDue
	}
	if !it.PlannedAt.IsZero() {
		flags |= flagPlanned
	}
	if !it.ExpiresAt.IsZero() {
		flags |= flagExpires
	}
	if it.Ordered() {
		flags |= flagOrdered
	}
	if it.Waiting {
		flags |= flagWaiting
	}
	buf = append(buf, itemV2, flags, byte(it.Class))
	for _, s := range [...]string{it.DeliveryID, it.TenantID, it.EventID, it.EventType, it.EndpointID} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	buf = binary.AppendVarint(buf, it.ConfigVersion)
	buf = binary.AppendVarint(buf, int64(it.Attempts))
	for _, t := range [...]struct {
		flag byte
		at   time.Time
	}{{flagDue, it.DueAt}, {flagPlanned, it.PlannedAt}, {flagExpires, it.ExpiresAt}} {
		if flags&t.flag != 0 {
			buf = binary.AppendVarint(buf, t.at.UnixNano())
		}
	}
	if flags&flagOrdered != 0 {
		buf = append(buf, byte(it.Ordering))
		buf = binary.AppendUvarint(buf, uint64(len(it.OrderingKey)))
		buf = append(buf, it.OrderingKey...)
		buf = binary.AppendVarint(buf, it.Sequence)
		buf = binary.AppendUvarint(buf, it.Plan.Commit)
		buf = binary.AppendUvarint(buf, it.Plan.Prepare)
	}
	return buf
}

// decodeItem decodes an item. Its strings are copies: v
// may be a buffer the store reuses.
func decodeItem(v []byte) (Item, error) {
	var it Item
	if len(v) < 3 || (v[0] != itemV1 && v[0] != itemV2) {
		return Item{}, fmt.Errorf("decode item: unknown encoding")
	}
	flags := v[1]
	it.Class, it.Manual, it.Waiting = Class(v[2]), flags&flagManual != 0, flags&flagWaiting != 0
	rest := v[3:]
	for _, s := range [...]*string{&it.DeliveryID, &it.TenantID, &it.EventID, &it.EventType, &it.EndpointID} {
		n, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < n {
			return Item{}, errShortItem
		}
		*s = string(rest[k : k+int(n)])
		rest = rest[k+int(n):]
	}
	var nums [2]int64
	for i := range nums {
		x, k := binary.Varint(rest)
		if k <= 0 {
			return Item{}, errShortItem
		}
		nums[i], rest = x, rest[k:]
	}
	it.ConfigVersion, it.Attempts = nums[0], int32(nums[1])
	for _, t := range [...]struct {
		flag byte
		at   *time.Time
	}{{flagDue, &it.DueAt}, {flagPlanned, &it.PlannedAt}, {flagExpires, &it.ExpiresAt}} {
		if flags&t.flag == 0 {
			continue
		}
		x, k := binary.Varint(rest)
		if k <= 0 {
			return Item{}, errShortItem
		}
		*t.at, rest = time.Unix(0, x).UTC(), rest[k:]
	}
	if flags&flagOrdered != 0 {
		if len(rest) < 1 {
			return Item{}, errShortItem
		}
		it.Ordering, rest = hooklinev1.KeyOrdering(rest[0]), rest[1:]
		n, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < n {
			return Item{}, errShortItem
		}
		it.OrderingKey, rest = string(rest[k:k+int(n)]), rest[k+int(n):]
		x, k := binary.Varint(rest)
		if k <= 0 {
			return Item{}, errShortItem
		}
		it.Sequence, rest = x, rest[k:]
		for _, u := range [...]*uint64{&it.Plan.Commit, &it.Plan.Prepare} {
			x, k := binary.Uvarint(rest)
			if k <= 0 {
				return Item{}, errShortItem
			}
			*u, rest = x, rest[k:]
		}
	}
	return it, nil
}
