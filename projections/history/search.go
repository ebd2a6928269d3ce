package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/hookline/hookline/projections"
)

var (
	// ErrBadCursor means a Search cursor was not made by Search for the same
	// query: damaged, altered, or made for other filters or another tenant.
	ErrBadCursor = errors.New("history: invalid cursor")
	// ErrBadQuery means a Search query is malformed.
	ErrBadQuery = errors.New("history: invalid query")
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
	// A full page always has a Next, which may lead to an empty page. A page
	// may hold fewer than Limit deliveries with Next set, when the search
	// used up its scan budget (filters served by no index: event type
	// together with endpoint or status).
	Next string
}

// Search returns a page of the tenant's deliveries that match q, newest
// planned first. It reads one index: (tenant, endpoint, status), (tenant,
// endpoint), (tenant, status), (tenant, event type) or (tenant), picked by
// which filters are set; an event type combined with another filter is
// checked on each delivery read, within the scan budget.
func (h *History) Search(q Query) (Page, error) {
	if q.TenantID == "" {
		return Page{}, fmt.Errorf("%w: tenant is required", ErrBadQuery)
	}
	if q.Status != 0 && (q.Status < Pending || q.Status > Failed) {
		return Page{}, fmt.Errorf("%w: unknown status %d", ErrBadQuery, q.Status)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return Page{}, fmt.Errorf("%w: since %s is not before until %s", ErrBadQuery, q.Since, q.Until)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)

	ix := pickIndex(q)
	ipfx := indexPrefix(ix, q.TenantID, q.EndpointID, q.Status, q.EventType)
	checkType := q.EventType != "" && ix != byType

	newest, oldest, ok, err := h.days()
	if err != nil || !ok {
		return Page{}, err
	}
	if !q.Until.IsZero() {
		newest = min(newest, dayOf(q.Until.Add(-time.Nanosecond)))
	}
	if !q.Since.IsZero() {
		oldest = max(oldest, dayOf(q.Since))
	}
	var after []byte
	if q.Cursor != "" {
		if after, err = decodeCursor(q, ipfx); err != nil {
			return Page{}, err
		}
		day, _ := dayOfKey(after)
		newest = min(newest, day)
		if len(after) == 1+dayBytes {
			after = nil // resume at the start of that day
		}
	}

	sc := scan{q: q, checkType: checkType, limit: limit, budget: h.cfg.ScanBudget}
	for day := newest; day >= oldest; day-- {
		if sc.budget <= 0 {
			// Every newer day is done: resume at the start of this one.
			sc.page.Next = encodeCursor(q, dayPrefix(day))
			return sc.page, nil
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
		done, err := h.scanDay(&sc, dp, lower, upper)
		if err != nil {
			return Page{}, fmt.Errorf("search deliveries of %s: %w", q.TenantID, err)
		}
		if done {
			sc.page.Next = encodeCursor(q, sc.last)
			return sc.page, nil
		}
	}
	return sc.page, nil
}

// scan is the state of one Search.
type scan struct {
	q         Query
	checkType bool
	limit     int
	budget    int
	page      Page
	last      []byte // the last index key examined
}

// scanDay reads one day of an index into the page. done means the page is
// full or the budget is spent: resume after sc.last.
func (h *History) scanDay(sc *scan, dp, lower, upper []byte) (done bool, err error) {
	it, err := h.store.NewIter(lower, upper)
	if err != nil {
		return false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		sc.budget--
		key := it.Key()
		planned, id, err := parseIndexTail(key[len(dp):])
		if err != nil {
			return false, err
		}
		sc.last = append(sc.last[:0], key...)
		d, found, err := h.loadRecord(h.store, recordKey(planned, id))
		if err != nil {
			return false, err
		}
		if found && (!sc.checkType || d.EventType == sc.q.EventType) {
			sc.page.Deliveries = append(sc.page.Deliveries, d)
		}
		if len(sc.page.Deliveries) == sc.limit || sc.budget <= 0 {
			return true, nil
		}
	}
	return false, nil
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
	if _, err := dayOfKey(key); err != nil {
		return nil, fmt.Errorf("%w: outside the query", ErrBadCursor)
	}
	if rest := key[1+dayBytes:]; len(rest) > 0 && !bytes.HasPrefix(rest, ipfx) {
		return nil, fmt.Errorf("%w: outside the query", ErrBadCursor)
	}
	return key, nil
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
