package due

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/hookline/hookline/events"
)

// Numbering. A key's head takes, the first time it is sent, one more than
// the last sequence its key was ever sent with (order_counter.go counts it):
// Pull numbers the heads it returns, and the endpoint grain numbers
// those it gets otherwise, with LastSent.

// LastSent returns the last sequence an endpoint's ordering key was sent
// with, as the committed store counts it: its token's count, its legacy
// count and the endpoint's floor, whichever is highest; 0 for a key never
// sent. A key's head is sent first with one more. A token whose data key
// was erased finds no count of its own (it moved to the floor), or one
// that the floor is at least as high as. Safe for concurrent use.
func (d *Due) LastSent(tenantID, endpointID, key string, token []byte, _ string) (int64, error) {
	return d.counts.lastSent(tenantID, endpointID, key, token)
}

// lastSent reads a key's last sequence from the committed store (see
// [Due.LastSent]).
func (ct *counter) lastSent(tenantID, endpointID, key string, token []byte) (int64, error) {
	var last int64
	if ct.marks.floors.Load() {
		f, _, err := getCount(ct.store, floorKey(tenantID, endpointID))
		if err != nil {
			return 0, err
		}
		last = f.last
	}
	if len(token) > 0 {
		c, _, err := getCount(ct.store, countKey(tenantID, endpointID, token))
		if err != nil {
			return 0, err
		}
		last = max(last, c.last)
	}
	if ct.marks.legacy.Load() {
		v, ok, err := ct.store.Get(legacyKey(tenantID, endpointID, key))
		if err != nil {
			return 0, err
		}
		if ok {
			if l, n := binary.Uvarint(v); n > 0 {
				last = max(last, int64(l))
			}
		}
	}
	return last, nil
}

// Tokens gives the token standing for an endpoint's ordering key
// (seal.Payloads.Token, which a nil *seal.Payloads answers too): Pull
// numbers the heads it returns with it.
type Tokens interface {
	Token(ctx context.Context, tenantID string, parts ...string) (token []byte, tokenKey string, err error)
}

// tokenTimeout bounds the making of one token (a read of the tenant's
// data key from the vault, the first time).
const tokenTimeout = 5 * time.Second

// numbered is a head's number, remembered: a head is pulled again while
// its grain holds it, and its number cannot change before it is sent (its
// key's count moves only with its own attempt, after which the index
// holds the sequence it was sent with).
type numbered struct {
	plan     events.Position // a delivery planned again is another head
	seq      int64
	token    []byte
	tokenKey string
}

// maxNumbered bounds the heads' numbers remembered: about as many as the
// grains of a node hold at once.
const maxNumbered = 16384

// numbering numbers the heads a pull returns, and remembers their
// numbers; safe for concurrent use.
type numbering struct {
	tokens Tokens // nil: the grain numbers the heads
	counts *counter

	mu sync.Mutex // guards m
	m  map[string]numbered
}

// number numbers the heads among items that were never sent: one more
// than their key's last sequence, as the grain would (LastSent), with the
// key's token. The grain sends them so, unless the token's data key has
// been erased since; without Tokens it numbers them itself.
func (n *numbering) number(items []Item) error {
	if n.tokens == nil {
		return nil
	}
	for i := range items {
		it := &items[i]
		if !it.Ordered() || it.Waiting || it.Sequence > 0 {
			continue
		}
		if v, ok := n.get(it.DeliveryID, it.Plan); ok {
			it.Sequence, it.Token, it.TokenKey = v.seq, v.token, v.tokenKey
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
		token, tokenKey, err := n.tokens.Token(ctx, it.TenantID, it.EndpointID, it.OrderingKey)
		cancel()
		if err != nil {
			return fmt.Errorf("token of the ordering key of %s: %w", it.DeliveryID, err)
		}
		last, err := n.counts.lastSent(it.TenantID, it.EndpointID, it.OrderingKey, token)
		if err != nil {
			return err
		}
		it.Sequence, it.Token, it.TokenKey = last+1, token, tokenKey
		n.put(it.DeliveryID, numbered{plan: it.Plan, seq: it.Sequence, token: token, tokenKey: tokenKey})
	}
	return nil
}

func (n *numbering) get(deliveryID string, plan events.Position) (numbered, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[deliveryID]
	return v, ok && v.plan == plan
}

func (n *numbering) put(deliveryID string, v numbered) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil || len(n.m) >= maxNumbered {
		n.m = make(map[string]numbered)
	}
	n.m[deliveryID] = v
}
