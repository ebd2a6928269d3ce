package due

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Sequences. A key's deliveries are numbered as they are sent: its head
// takes, at its first attempt, one more than the last sequence the key
// was ever sent with, and keeps it for its retries and replays (the
// endpoint grain numbers it, from LastSent). The index counts that last
// sequence per endpoint and key: from the attempts that carry one, and,
// for the attempts retention has dropped, from the endpoint's
// OrderingCheckpointed events, which never expire. It counts by token
// (Attempt.ordering_token, keyed by the tenant's data key), never by key:
// counts outlive deliveries, and a key is often a customer's id.
//
// A count not checkpointed yet is marked (u) since the attempt that made
// it so; the endpoint's grain checkpoints it (Unchecked) once it is
// CheckpointAfter old, or before it passivates when nothing wakes it, and
// the tenant's retention keeps the endpoint's ordered deliveries until
// then (Retains). A tenant's erasure (TenantErased) moves its counts into
// its endpoints' floors and forgets them: a key unknown afterwards goes
// on above its endpoint's floor, which is checkpointed at once. An
// endpoint's deletion forgets its counts. Records applied out of order
// across partitions (a partition caught up after an erasure) come to the
// same state: the markers x and X are consulted for every count. They
// come from records of no partition, which a rebuild of the index
// (projections.Runner.Rebuild) does not apply again: a rebuilt index
// holds the erased counts again, by token, and gets its floors back from
// their checkpoints.
//
// Keys, under the endpoint's partition P:
//
//	n P S(tenant) S(endpoint) S(token)  a key's count (countBytes)
//	f P S(tenant) S(endpoint)           the endpoint's floor (countBytes)
//	l P S(tenant) S(endpoint) S(key)    a legacy count, from attempts without a token (uvarint)
//	u P S(endpoint) T(since) S(token)   a count not checkpointed ("" for the floor); value: the tenant
//	x S(tenant) S(data key id)          an erased data key (TenantErased)
//	X S(endpoint)                       a deleted endpoint (EndpointDeleted)
//
// Legacy counts hold the keys whose last attempt was recorded before
// tokens existed; the key's next attempt, its tenant's erasure or its
// endpoint's deletion forgets them.

// counter keeps the counts. Its writes are the runner goroutine's; its
// reads of the committed store (lastSent, unchecked) are safe for
// concurrent use.
type counter struct {
	store   *projections.Store
	changes *changes // where it notes the endpoints whose unchecked counts it changed
	marks   marks
}

// marks mirrors in memory what is rare in the store and consulted for
// every count: the erased data keys and the deleted endpoints (only the
// runner's goroutine reads and writes them, after New), and whether the
// store holds any legacy count or floor at all (set before the batch that
// writes one commits: a reader that sees false has none to read).
type marks struct {
	erased  map[string]struct{} // tenant "\x00" data key id
	deleted map[string]struct{} // endpoint id
	legacy  atomic.Bool
	floors  atomic.Bool
}

// loadMarks reads the marks from the store, when the index opens.
func (ct *counter) loadMarks() error {
	ct.marks.erased, ct.marks.deleted = map[string]struct{}{}, map[string]struct{}{}
	err := ct.store.ScanPrefix([]byte{'x'}, func(k, _ []byte) (bool, error) {
		tenantID, rest, err := projections.ReadString(k[1:])
		if err != nil {
			return false, err
		}
		keyID, _, err := projections.ReadString(rest)
		ct.marks.erased[tenantID+"\x00"+keyID] = struct{}{}
		return true, err
	})
	if err != nil {
		return err
	}
	err = ct.store.ScanPrefix([]byte{'X'}, func(k, _ []byte) (bool, error) {
		ep, _, err := projections.ReadString(k[1:])
		ct.marks.deleted[ep] = struct{}{}
		return true, err
	})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		tag  byte
		flag *atomic.Bool
	}{{'l', &ct.marks.legacy}, {'f', &ct.marks.floors}} {
		err := ct.store.ScanPrefix([]byte{f.tag}, func(_, _ []byte) (bool, error) {
			f.flag.Store(true)
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// erasedToken reports whether a token's data key was erased; a token
// without a key (no vault) never is.
func (ct *counter) erasedToken(tenantID, tokenKey string) bool {
	_, ok := ct.marks.erased[tenantID+"\x00"+tokenKey]
	return ok && tokenKey != ""
}

// gone reports whether an endpoint was deleted.
func (ct *counter) gone(endpointID string) bool {
	_, ok := ct.marks.deleted[endpointID]
	return ok
}

// sent counts an attempt's sequence for its key.
func (ct *counter) sent(b *projections.Batch, a *hooklinev1.Attempt) error {
	seq, key, tenantID, endpointID := a.GetSequence(), a.GetOrderingKey(), a.GetTenantId(), a.GetEndpointId()
	if seq <= 0 || key == "" || ct.gone(endpointID) {
		return nil
	}
	token, at := a.GetOrderingToken(), asTime(a.GetStartedAt())
	if len(token) == 0 {
		return ct.raiseLegacy(b, tenantID, endpointID, key, seq)
	}
	if err := ct.forgetLegacy(b, tenantID, endpointID, key); err != nil {
		return err
	}
	if ct.erasedToken(tenantID, a.GetOrderingTokenKey()) {
		return ct.raise(b, floorKey(tenantID, endpointID), tenantID, endpointID, nil, "", seq, 0, at)
	}
	return ct.raise(b, countKey(tenantID, endpointID, token), tenantID, endpointID, token, a.GetOrderingTokenKey(), seq, 0, at)
}

// raise lifts the count at k (of token, nil for a floor) to the sequence
// sent at at, and its checkpointed part to checkpointed, and keeps its
// unchecked mark (u) in step. A floor is due for its checkpoint at once
// (since the zero time): a rebuild gets it back only from there.
func (ct *counter) raise(b *projections.Batch, k []byte, tenantID, endpointID string, token []byte, tokenKey string, sent, checkpointed int64, at time.Time) error {
	if token == nil {
		ct.marks.floors.Store(true)
		at = time.Time{}
	}
	c, _, err := getCount(b, k)
	if err != nil {
		return err
	}
	before := c
	if sent > c.last {
		c.last = sent
		if !before.unchecked() {
			c.since = at
		}
	}
	c.checkpointed = max(c.checkpointed, checkpointed)
	c.last = max(c.last, c.checkpointed)
	if !c.unchecked() {
		c.since = time.Time{}
	}
	if tokenKey != "" {
		c.tokenKey = tokenKey
	}
	if c.last == before.last && c.checkpointed == before.checkpointed && c.tokenKey == before.tokenKey && c.since.Equal(before.since) {
		return nil
	}
	if err := ct.markUnchecked(b, tenantID, endpointID, token, &before, &c); err != nil {
		return err
	}
	return b.Set(k, countBytes(&c))
}

// markUnchecked moves a count's u entry from before to after.
func (ct *counter) markUnchecked(b *projections.Batch, tenantID, endpointID string, token []byte, before, after *count) error {
	if before.unchecked() == after.unchecked() && before.since.Equal(after.since) {
		return nil
	}
	ct.changes.count(b, endpointID)
	if before.unchecked() {
		if err := b.Delete(uncheckedKey(endpointID, before.since, token)); err != nil {
			return err
		}
	}
	if after.unchecked() {
		return b.Set(uncheckedKey(endpointID, after.since, token), []byte(tenantID))
	}
	return nil
}

// raiseLegacy counts an attempt recorded without a token under its key.
func (ct *counter) raiseLegacy(b *projections.Batch, tenantID, endpointID, key string, seq int64) error {
	ct.marks.legacy.Store(true)
	k := legacyKey(tenantID, endpointID, key)
	v, ok, err := b.Get(k)
	if err != nil {
		return err
	}
	if ok {
		if last, n := binary.Uvarint(v); n > 0 && int64(last) >= seq {
			return nil
		}
	}
	return b.Set(k, binary.AppendUvarint(nil, uint64(seq)))
}

// forgetLegacy forgets a key's legacy count, once an attempt with a token
// carries its sequence on.
func (ct *counter) forgetLegacy(b *projections.Batch, tenantID, endpointID, key string) error {
	if !ct.marks.legacy.Load() {
		return nil
	}
	k := legacyKey(tenantID, endpointID, key)
	if ok, err := has(b, k); err != nil || !ok {
		return err
	}
	return b.Delete(k)
}

// checkpointed applies an endpoint's OrderingCheckpointed.
func (ct *counter) checkpointed(b *projections.Batch, m *hooklinev1.OrderingCheckpointed) error {
	tenantID, endpointID := m.GetTenantId(), m.GetEndpointId()
	if ct.gone(endpointID) {
		return nil
	}
	floor := floorKey(tenantID, endpointID)
	for _, c := range m.GetCounts() {
		var err error
		switch {
		case ct.erasedToken(tenantID, c.GetTokenKey()):
			err = ct.raise(b, floor, tenantID, endpointID, nil, "", 0, c.GetSequence(), time.Time{})
		default:
			err = ct.raise(b, countKey(tenantID, endpointID, c.GetToken()), tenantID, endpointID, c.GetToken(), c.GetTokenKey(), 0, c.GetSequence(), time.Time{})
		}
		if err != nil {
			return err
		}
	}
	if f := m.GetFloor(); f > 0 {
		return ct.raise(b, floor, tenantID, endpointID, nil, "", 0, f, time.Time{})
	}
	return nil
}

// tenantErased marks the tenant's data key erased, and moves every count
// of its tokens under that key, and every legacy count (keys in clear),
// into the floor of its endpoint.
func (ct *counter) tenantErased(b *projections.Batch, m *hooklinev1.TenantErased) error {
	tenantID, keyID, at := m.GetTenantId(), m.GetDataKeyId(), asTime(m.GetAt())
	if keyID != "" {
		ct.marks.erased[tenantID+"\x00"+keyID] = struct{}{}
		if err := b.Set(erasedKey(tenantID, keyID), nil); err != nil {
			return err
		}
	}
	for p := events.Partition(1); p <= events.Partitions; p++ {
		if err := ct.eraseIn(b, p, tenantID, keyID, at); err != nil {
			return err
		}
	}
	return nil
}

// eraseIn moves a tenant's erased counts in partition p to the floors.
func (ct *counter) eraseIn(b *projections.Batch, p events.Partition, tenantID, keyID string, at time.Time) error {
	type moved struct {
		key      []byte
		endpoint string
		token    []byte
		c        count
		legacy   bool // an l entry: it has no u entry
	}
	var all []moved
	for _, tag := range []byte{'n', 'l'} {
		prefix := tenantPrefix(tag, p, tenantID)
		err := b.ScanPrefix(prefix, func(k, v []byte) (bool, error) {
			ep, rest, err := projections.ReadString(k[len(prefix):])
			if err != nil {
				return false, err
			}
			name, _, err := projections.ReadString(rest)
			if err != nil {
				return false, err
			}
			mv := moved{key: bytes.Clone(k), endpoint: ep, legacy: tag == 'l'}
			if mv.legacy {
				last, n := binary.Uvarint(v)
				if n <= 0 {
					return false, errShortItem
				}
				mv.c = count{last: int64(last), since: at}
			} else {
				if mv.c, err = decodeCount(v); err != nil {
					return false, err
				}
				if mv.c.tokenKey != keyID || keyID == "" {
					return true, nil // another key's token: not erased by this
				}
				mv.token = []byte(name)
			}
			all = append(all, mv)
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	for _, mv := range all {
		if !mv.legacy && mv.c.unchecked() {
			if err := b.Delete(uncheckedKey(mv.endpoint, mv.c.since, mv.token)); err != nil {
				return err
			}
			ct.changes.count(b, mv.endpoint)
		}
		if err := b.Delete(mv.key); err != nil {
			return err
		}
		if err := ct.raise(b, floorKey(tenantID, mv.endpoint), tenantID, mv.endpoint, nil, "", mv.c.last, mv.c.checkpointed, at); err != nil {
			return err
		}
	}
	return nil
}

// endpointDeleted marks the endpoint deleted and forgets its counts.
func (ct *counter) endpointDeleted(b *projections.Batch, m *hooklinev1.EndpointDeleted) error {
	tenantID, endpointID := m.GetTenantId(), m.GetEndpointId()
	ct.marks.deleted[endpointID] = struct{}{}
	if err := b.Set(deletedKey(endpointID), nil); err != nil {
		return err
	}
	for _, prefix := range [][]byte{countPrefix('n', tenantID, endpointID), countPrefix('l', tenantID, endpointID), uncheckedPrefix(endpointID)} {
		var doomed [][]byte
		err := b.ScanPrefix(prefix, func(k, _ []byte) (bool, error) {
			doomed = append(doomed, bytes.Clone(k))
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	ct.changes.count(b, endpointID)
	return b.Delete(floorKey(tenantID, endpointID))
}

// count is a key's (or a floor's) last sequence sent.
type count struct {
	last int64
	// checkpointed is the highest sequence an OrderingCheckpointed holds.
	checkpointed int64
	// since is when the count became unchecked (last > checkpointed): the
	// start of the first attempt since its last checkpoint that raised it.
	since time.Time
	// tokenKey is the data key id a key's token is keyed by.
	tokenKey string
}

func (c *count) unchecked() bool { return c.last > c.checkpointed }

const countV1 = 1

func countBytes(c *count) []byte {
	b := []byte{countV1}
	b = binary.AppendUvarint(b, uint64(c.last))
	b = binary.AppendUvarint(b, uint64(c.checkpointed))
	var since int64
	if !c.since.IsZero() {
		since = c.since.UnixNano()
	}
	b = binary.AppendVarint(b, since)
	b = binary.AppendUvarint(b, uint64(len(c.tokenKey)))
	return append(b, c.tokenKey...)
}

func decodeCount(v []byte) (count, error) {
	if len(v) < 1 || v[0] != countV1 {
		return count{}, fmt.Errorf("due: unknown count encoding")
	}
	rest := v[1:]
	var c count
	for _, u := range [...]*int64{&c.last, &c.checkpointed} {
		x, k := binary.Uvarint(rest)
		if k <= 0 {
			return count{}, errShortItem
		}
		*u, rest = int64(x), rest[k:]
	}
	since, k := binary.Varint(rest)
	if k <= 0 {
		return count{}, errShortItem
	}
	if rest = rest[k:]; since != 0 {
		c.since = time.Unix(0, since).UTC()
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || uint64(len(rest)-k) < n {
		return count{}, errShortItem
	}
	c.tokenKey = string(rest[k : k+int(n)])
	return c, nil
}

func partitionOf(tag byte, endpointID string) []byte {
	return binary.BigEndian.AppendUint16([]byte{tag}, uint16(events.PartitionOf(endpointID)))
}

// tenantPrefix starts tag's keys of a tenant in partition p.
func tenantPrefix(tag byte, p events.Partition, tenantID string) []byte {
	return projections.AppendString(binary.BigEndian.AppendUint16([]byte{tag}, uint16(p)), tenantID)
}

func countPrefix(tag byte, tenantID, endpointID string) []byte {
	return projections.AppendString(tenantPrefix(tag, events.PartitionOf(endpointID), tenantID), endpointID)
}

func countKey(tenantID, endpointID string, token []byte) []byte {
	return projections.AppendString(countPrefix('n', tenantID, endpointID), string(token))
}

func floorKey(tenantID, endpointID string) []byte { return countPrefix('f', tenantID, endpointID) }

func legacyKey(tenantID, endpointID, key string) []byte {
	return projections.AppendString(countPrefix('l', tenantID, endpointID), key)
}

func uncheckedPrefix(endpointID string) []byte {
	return projections.AppendString(partitionOf('u', endpointID), endpointID)
}

func uncheckedKey(endpointID string, since time.Time, token []byte) []byte {
	return projections.AppendString(projections.AppendTime(uncheckedPrefix(endpointID), since), string(token))
}

func erasedKey(tenantID, dataKeyID string) []byte {
	return projections.AppendString(projections.AppendString([]byte{'x'}, tenantID), dataKeyID)
}

func deletedKey(endpointID string) []byte { return projections.AppendString([]byte{'X'}, endpointID) }

func getCount(r reader, k []byte) (count, bool, error) {
	v, ok, err := r.Get(k)
	if err != nil || !ok {
		return count{}, false, err
	}
	c, err := decodeCount(v)
	return c, true, err
}

func has(r reader, k []byte) (bool, error) {
	_, ok, err := r.Get(k)
	return ok, err
}
