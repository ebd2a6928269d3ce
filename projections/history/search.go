package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

var (
	// ErrBadCursor means a Search cursor was not made by Search for the same
	// query: damaged, altered, or made for other filters or another tenant.
	ErrBadCursor = errors.New("history: invalid cursor")
	// ErrBadQuery means a Search query is malformed.
	ErrBadQuery = errors.New("history: invalid query")
	// ErrIncomplete means a cluster-wide search or read could not reach a
	// node serving every partition (one is down, or catching up after
	// partitions moved): retrying shortly will do.
	ErrIncomplete = errors.New("history: some partitions are not served right now")
)

// Query selects a tenant's deliveries. Empty fields do not filter.
type Query struct {
	// TenantID is required: a search never crosses tenants.
	TenantID   string
	EndpointID string
	// Status is 0 for any status.
	Status    Status
	EventType string
	// Since and Until bound the planned time: Since <= planned < Until.
	Since, Until time.Time
	// Limit is the page size; 0 means DefaultLimit, at most MaxLimit.
	Limit int
	// Cursor is the Next of the previous page; "" for the first page.
	Cursor string
}

// Page is one page of search results, newest first.
type Page struct {
	Deliveries []Delivery
	// Next is the cursor of the following page; "" when the search is done.
	// A page may hold fewer than Limit deliveries with Next set, when the
	// search used up its scan budget (filters served by no index: event
	// type together with endpoint or status).
	Next string
}

// Partial is one store's part of a search: what [History.Scan] found, to be
// put together with the other nodes' parts by [Merge].
type Partial struct {
	// Entries are the matching deliveries, in index order (newest first),
	// each with its index key.
	Entries []Entry
	// Frontier is the last index key the scan examined when it stopped
	// early (its page full, or its scan budget spent); nil when Done.
	Frontier []byte
	// Done: the scan examined everything the query covers after its start.
	Done bool
}

// Entry is one delivery found by a scan, with the index key it was found
// under: keys order the results of every node the same way.
type Entry struct {
	Key      []byte
	Delivery Delivery
}

// Search returns a page of the tenant's deliveries that match q, newest
// planned first, from this store alone: the whole search of a single node,
// or of a store that holds every partition. A cluster asks every node to
// [History.Scan] its partitions and [Merge]s the parts. It reads one index:
// (tenant, endpoint, status), (tenant, endpoint), (tenant, status), (tenant,
// event type) or (tenant), picked by which filters are set; an event type
// combined with another filter is checked on each delivery read, within the
// scan budget.
func (h *History) Search(q Query) (Page, error) {
	after, err := CursorKey(q)
	if err != nil {
		return Page{}, err
	}
	part, err := h.Scan(q, after, nil)
	if err != nil {
		return Page{}, err
	}
	return Merge(q, []Partial{part}), nil
}

// CheckQuery reports a malformed query (wrapping [ErrBadQuery]).
func CheckQuery(q Query) error {
	if q.TenantID == "" {
		return fmt.Errorf("%w: tenant is required", ErrBadQuery)
	}
	if q.Status != 0 && (q.Status < Pending || q.Status > Failed) {
		return fmt.Errorf("%w: unknown status %d", ErrBadQuery, q.Status)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return fmt.Errorf("%w: since %s is not before until %s", ErrBadQuery, q.Since, q.Until)
	}
	return nil
}

// CursorKey checks q and returns the index key its cursor resumes after
// (nil for the first page); a cursor that is not one of q's fails with
// [ErrBadCursor].
func CursorKey(q Query) ([]byte, error) {
	if err := CheckQuery(q); err != nil {
		return nil, err
	}
	if q.Cursor == "" {
		return nil, nil
	}
	return decodeCursor(q, indexPrefix(pickIndex(q), q.TenantID, q.EndpointID, q.Status, q.EventType))
}

// LimitOf is q's page size: its Limit, or DefaultLimit, at most MaxLimit.
func LimitOf(q Query) int {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	return min(limit, MaxLimit)
}

// Scan finds, in this store, the deliveries that match q (its cursor
// ignored) after the index key after (nil: from the newest), of the
// partitions in parts (nil: all), in index order: up to q's limit plus one
// (the one more tells whether a next page exists), within the scan budget.
// Deliveries of other partitions are passed over: in a cluster the store
// may also hold partitions another node serves now.
func (h *History) Scan(q Query, after []byte, parts *events.PartitionSet) (Partial, error) {
	if err := CheckQuery(q); err != nil {
		return Partial{}, err
	}
	ix := pickIndex(q)
	ipfx := indexPrefix(ix, q.TenantID, q.EndpointID, q.Status, q.EventType)
	if after != nil {
		if err := checkKey(after, ipfx); err != nil {
			return Partial{}, err
		}
	}
	newest, oldest, ok, err := h.days()
	if err != nil || !ok {
		return Partial{Done: true}, err
	}
	if !q.Until.IsZero() {
		newest = min(newest, dayOf(q.Until.Add(-time.Nanosecond)))
	}
	if !q.Since.IsZero() {
		oldest = max(oldest, dayOf(q.Since))
	}
	if after != nil {
		day, _ := dayOfKey(after)
		newest = min(newest, day)
		if len(after) == 1+dayBytes {
			after = nil // resume at the start of that day
		}
	}

	sc := scan{q: q, checkType: q.EventType != "" && ix != byType, parts: parts, limit: LimitOf(q) + 1, budget: h.cfg.ScanBudget}
	for day := newest; day >= oldest; day-- {
		if sc.budget <= 0 {
			// Every newer day is done: resume at the start of this one.
			sc.part.Frontier = dayPrefix(day)
			return sc.part, nil
		}
		sc.budget-- // a day costs a seek
		dp := append(dayPrefix(day), ipfx...)
		lower, upper := dp, projections.PrefixEnd(dp)
		if !q.Until.IsZero() {
			lower = projections.AppendTimeDesc(bytes.Clone(dp), q.Until.Add(-time.Nanosecond))
		}
		if !q.Since.IsZero() {
			upper = projections.PrefixEnd(projections.AppendTimeDesc(bytes.Clone(dp), q.Since))
		}
		if after != nil && bytes.HasPrefix(after, dp) {
			if past := append(bytes.Clone(after), 0); bytes.Compare(past, lower) > 0 {
				lower = past
			}
		}
		stopped, err := h.scanDay(&sc, dp, lower, upper)
		if err != nil {
			return Partial{}, fmt.Errorf("search deliveries of %s: %w", q.TenantID, err)
		}
		if stopped {
			sc.part.Frontier = bytes.Clone(sc.last)
			return sc.part, nil
		}
	}
	sc.part.Done = true
	return sc.part, nil
}

// Merge puts together the parts of one search, from stores that hold
// disjoint sets of partitions (an entry found twice, while two nodes both
// served its partition, counts once), into the page that one store holding
// everything would have answered: the entries up to the smallest frontier,
// in index order, at most q's limit, and the cursor of the next page.
func Merge(q Query, parts []Partial) Page {
	var frontier []byte // the smallest frontier; nil: every part is done
	n := 0
	for _, p := range parts {
		n += len(p.Entries)
		if !p.Done && (frontier == nil || bytes.Compare(p.Frontier, frontier) < 0) {
			frontier = p.Frontier
		}
	}
	entries := make([]Entry, 0, n)
	for _, p := range parts {
		for _, e := range p.Entries {
			if frontier == nil || bytes.Compare(e.Key, frontier) <= 0 {
				entries = append(entries, e)
			}
		}
	}
	slices.SortFunc(entries, func(a, b Entry) int { return bytes.Compare(a.Key, b.Key) })
	entries = slices.CompactFunc(entries, func(a, b Entry) bool { return bytes.Equal(a.Key, b.Key) })
	limit := LimitOf(q)
	var page Page
	switch {
	case len(entries) > limit:
		entries = entries[:limit]
		page.Next = encodeCursor(q, entries[limit-1].Key)
	case frontier != nil:
		page.Next = encodeCursor(q, frontier)
	}
	page.Deliveries = make([]Delivery, len(entries))
	for i, e := range entries {
		page.Deliveries[i] = e.Delivery
	}
	return page
}

// Behind returns the indexes of the parts of one search that must scan
// further before [Merge] can answer a full page: those not done whose
// frontier comes before the key of what would be the page's last entry
// (every part not done, while all the parts hold fewer entries than a
// page). A search that asks each store for fewer entries than the page
// (a cluster asks each member for about its share) continues those parts
// after their frontiers, so that its pages are as full as one store's.
// None means Merge's page is final.
func Behind(q Query, parts []Partial) []int {
	limit := LimitOf(q)
	keys := entryKeys(parts, func([]byte) bool { return true })
	var last []byte // nil: fewer entries than a page
	if len(keys) >= limit {
		last = keys[limit-1]
	}
	var out []int
	for i, p := range parts {
		if !p.Done && (last == nil || bytes.Compare(p.Frontier, last) < 0) {
			out = append(out, i)
		}
	}
	return out
}

// Room returns how many entries part i of a search, one that [Behind]
// returned, may still add to the page: the page's limit less the entries
// the parts found up to part i's frontier, which stay in the page whatever
// part i finds after it. Continued for that many, part i is no longer
// behind, and the others' entries only move the page's end earlier: one
// round of continuations completes a page.
func Room(q Query, parts []Partial, i int) int {
	f := parts[i].Frontier
	return max(1, LimitOf(q)-len(entryKeys(parts, func(k []byte) bool { return bytes.Compare(k, f) <= 0 })))
}

// entryKeys returns the keys of the parts' entries that keep accepts,
// sorted, each once.
func entryKeys(parts []Partial, keep func(key []byte) bool) [][]byte {
	var keys [][]byte
	for _, p := range parts {
		for _, e := range p.Entries {
			if keep(e.Key) {
				keys = append(keys, e.Key)
			}
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal)
}

// Continue appends next, the scan of a part resumed after its frontier,
// to p.
func (p *Partial) Continue(next Partial) {
	p.Entries = append(p.Entries, next.Entries...)
	p.Frontier, p.Done = next.Frontier, next.Done
}

// scan is the state of one Scan.
type scan struct {
	q         Query
	checkType bool
	parts     *events.PartitionSet
	limit     int
	budget    int
	part      Partial
	last      []byte // the last index key examined
}

// scanDay reads one day of an index into the partial result. stopped means
// the scan has its entries or the budget is spent: resume after sc.last.
func (h *History) scanDay(sc *scan, dp, lower, upper []byte) (stopped bool, err error) {
	// The day's records are read with one iterator, not one Get each: the
	// index and the records are both in planned-time order, so each seek
	// lands at or just after the one before (Pebble then steps instead of
	// seeking from the top, and reads each block once).
	var records *recordReader
	defer func() {
		if records != nil {
			err = errors.Join(err, records.close())
		}
	}()
	err = h.store.Scan(lower, upper, func(key, value []byte) (bool, error) {
		sc.budget--
		planned, id, err := parseIndexTail(key[len(dp):])
		if err != nil {
			return false, err
		}
		sc.last = append(sc.last[:0], key...)
		if p, ok := partitionOfValue(value); ok && sc.parts != nil && !sc.parts.Has(p) {
			stopped = sc.budget <= 0 // another member's: its record is not loaded
			return !stopped, nil
		}
		if records == nil {
			if records, err = h.newRecordReader(dp[:1+dayBytes]); err != nil {
				return false, err
			}
		}
		d, found, err := h.loadRecord(records, recordKey(planned, id))
		if err != nil {
			return false, err
		}
		if found && (!sc.checkType || d.EventType == sc.q.EventType) &&
			(sc.parts == nil || sc.parts.Has(events.PartitionOf(d.EndpointID))) {
			sc.part.Entries = append(sc.part.Entries, Entry{Key: bytes.Clone(key), Delivery: d})
		}
		stopped = len(sc.part.Entries) == sc.limit || sc.budget <= 0
		return !stopped, nil
	})
	return stopped, err
}

// pickIndex chooses the index that serves the most of q's filters.
func pickIndex(q Query) index {
	switch {
	case q.EndpointID != "" && q.Status != 0:
		return byEndpointStatus
	case q.EndpointID != "":
		return byEndpoint
	case q.Status != 0:
		return byStatus
	case q.EventType != "":
		return byType
	}
	return byTenant
}

// days returns the newest and oldest days that hold deliveries.
func (h *History) days() (newest, oldest int64, ok bool, err error) {
	it, err := h.store.NewIter([]byte{'d'}, []byte{'d' + 1})
	if err != nil {
		return 0, 0, false, err
	}
	defer it.Close()
	if !it.First() {
		return 0, 0, false, nil
	}
	if newest, err = dayOfKey(it.Key()); err != nil {
		return 0, 0, false, err
	}
	it.Last()
	if oldest, err = dayOfKey(it.Key()); err != nil {
		return 0, 0, false, err
	}
	return newest, oldest, true, nil
}

// A cursor is base64url(version 1, query fingerprint (8), key, checksum (8)).
// The checksum catches damage and casual edits; the key is also checked to
// lie inside the query's own index range, so even a forged cursor can only
// move within what the query may read.
const cursorVersion = 1

func encodeCursor(q Query, key []byte) string {
	b := append([]byte{cursorVersion}, fingerprint(q)...)
	b = append(b, key...)
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(append(b, sum[:8]...))
}

func decodeCursor(q Query, ipfx []byte) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil || len(b) < 1+8+8 {
		return nil, fmt.Errorf("%w: not a cursor", ErrBadCursor)
	}
	body, sum := b[:len(b)-8], b[len(b)-8:]
	if want := sha256.Sum256(body); !bytes.Equal(sum, want[:8]) {
		return nil, fmt.Errorf("%w: damaged or altered", ErrBadCursor)
	}
	if body[0] != cursorVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrBadCursor, body[0])
	}
	if !bytes.Equal(body[1:9], fingerprint(q)) {
		return nil, fmt.Errorf("%w: made for another query", ErrBadCursor)
	}
	key := body[9:]
	if err := checkKey(key, ipfx); err != nil {
		return nil, err
	}
	return key, nil
}

// checkKey reports, as [ErrBadCursor], a resume key outside the query's
// index range: a day, or a key of that day under the query's index prefix.
func checkKey(key, ipfx []byte) error {
	if _, err := dayOfKey(key); err != nil {
		return fmt.Errorf("%w: outside the query", ErrBadCursor)
	}
	if rest := key[1+dayBytes:]; len(rest) > 0 && !bytes.HasPrefix(rest, ipfx) {
		return fmt.Errorf("%w: outside the query", ErrBadCursor)
	}
	return nil
}

// fingerprint identifies a query's filters (not its limit or cursor).
func fingerprint(q Query) []byte {
	k := projections.AppendString(nil, q.TenantID)
	k = projections.AppendString(k, q.EndpointID)
	k = append(k, byte(q.Status))
	k = projections.AppendString(k, q.EventType)
	k = projections.AppendTime(k, q.Since)
	k = projections.AppendTime(k, q.Until)
	sum := sha256.Sum256(k)
	return sum[:8]
}

// recordReader reads the records of one day, in key order, with one
// iterator: a [reader] for loadRecord.
type recordReader struct {
	it *projections.Iter
}

func (h *History) newRecordReader(day []byte) (*recordReader, error) {
	prefix := append(bytes.Clone(day), 'r')
	it, err := h.store.NewIter(prefix, projections.PrefixEnd(prefix))
	if err != nil {
		return nil, err
	}
	return &recordReader{it: it}, nil
}

// Get returns the record at key (a record key of the reader's day).
func (r *recordReader) Get(key []byte) ([]byte, bool, error) {
	if !r.it.SeekGE(key) || !bytes.Equal(r.it.Key(), key) {
		return nil, false, r.it.Error()
	}
	v, err := r.it.Value()
	return v, err == nil, err
}

func (r *recordReader) close() error { return r.it.Close() }
