package due

import (
	"encoding/binary"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// Checkpoints. A count not checkpointed yet (order_counter.go) is evidence
// that retention will drop: the endpoint's grain writes it to the
// endpoint's ordering stream (OrderingCheckpointed) once it has been
// unchecked for CheckpointAfter, and the index wakes the grain for it
// then. The wakes keep, per endpoint of the live partitions, since when
// its oldest unchecked count has waited, in memory (loaded with the
// partition, refreshed after each batch that changed one); the counter
// reads the counts themselves from the store.

// Count is one key's count, as an OrderingCheckpointed holds it.
type Count struct {
	Token    []byte
	TokenKey string
	Sequence int64
}

// Checkpoint is what an endpoint's next OrderingCheckpointed holds.
type Checkpoint struct {
	TenantID string
	Counts   []Count
	// Floor is the endpoint's floor when it is unchecked, else 0.
	Floor int64
}

// Empty reports whether there is nothing to checkpoint.
func (c *Checkpoint) Empty() bool { return len(c.Counts) == 0 && c.Floor == 0 }

// CheckpointDue reports whether an endpoint of a live partition has a
// count that has waited CheckpointAfter unchecked as of now, or, with
// all, any unchecked count. It reads memory only; safe for concurrent
// use.
func (d *Due) CheckpointDue(endpointID string, now time.Time, all bool) bool {
	return d.wakes.checkpointDue(endpointID, now, all)
}

// Retains reports whether the tenant's own retention must keep an ordered
// delivery of the endpoint whose last attempt started at lastAttempt: its
// attempts may carry a sequence not checkpointed yet (the endpoint has an
// unchecked count since then or before), which a rebuild after the drop
// would not know. The endpoint's grain checkpoints it within
// CheckpointAfter. An endpoint whose partition is not live here (caught up
// and loaded) cannot tell yet: its deliveries are retained. It reads
// memory only; safe for concurrent use.
func (d *Due) Retains(endpointID string, lastAttempt time.Time) bool {
	return d.wakes.retains(endpointID, lastAttempt)
}

// Unchecked returns what an endpoint's next checkpoint holds: up to limit
// of its unchecked counts, oldest first, and its floor when unchecked. It
// reads the committed store; safe for concurrent use.
func (d *Due) Unchecked(endpointID string, limit int) (Checkpoint, error) {
	return d.counts.unchecked(endpointID, limit)
}

// refreshUnchecked reads, after a commit, since when the counted
// endpoints' oldest unchecked counts have waited.
func (w *wakes) refreshUnchecked() {
	if len(w.changes.counted) == 0 {
		return
	}
	type seen struct {
		ep    string
		since time.Time
		ok    bool
	}
	var all []seen
	for ep := range w.changes.counted {
		since, ok, err := w.counts.oldestUnchecked(ep)
		if err != nil {
			w.logger.Error("due index: cannot read an endpoint's unchecked ordering counts", "endpoint_id", ep, "error", err)
			continue
		}
		all = append(all, seen{ep, since, ok})
	}
	clear(w.changes.counted)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range all {
		switch {
		case !w.live.Has(events.PartitionOf(s.ep)):
		case s.ok:
			w.unchecked[s.ep] = s.since
		default:
			delete(w.unchecked, s.ep)
		}
	}
}

func (w *wakes) checkpointDue(endpointID string, now time.Time, all bool) bool {
	w.mu.Lock()
	since, ok := w.unchecked[endpointID]
	w.mu.Unlock()
	return ok && (all || !now.Before(since.Add(w.checkpointAfter)))
}

func (w *wakes) retains(endpointID string, lastAttempt time.Time) bool {
	w.mu.Lock()
	since, ok := w.unchecked[endpointID]
	live := w.live.Has(events.PartitionOf(endpointID))
	w.mu.Unlock()
	return !live || ok && !lastAttempt.Before(since)
}

// wakeUnchecked returns the endpoints whose oldest unchecked count has
// waited CheckpointAfter as of now, for the sweep. w.mu must be held.
func (w *wakes) wakeUnchecked(now time.Time, wake []string) []string {
	for ep, since := range w.unchecked {
		if !now.Before(since.Add(w.checkpointAfter)) {
			wake = append(wake, ep)
		}
	}
	return wake
}

// unchecked reads an endpoint's next checkpoint from the committed store
// (see [Due.Unchecked]).
func (ct *counter) unchecked(endpointID string, limit int) (Checkpoint, error) {
	prefix := uncheckedPrefix(endpointID)
	var cp Checkpoint
	type mark struct{ tenant, token string }
	var marks []mark
	err := ct.store.ScanPrefix(prefix, func(k, v []byte) (bool, error) {
		_, rest, err := projections.ReadTime(k[len(prefix):])
		if err != nil {
			return false, err
		}
		token, _, err := projections.ReadString(rest)
		if err != nil {
			return false, err
		}
		marks = append(marks, mark{tenant: string(v), token: token})
		return limit <= 0 || len(marks) < limit, nil
	})
	if err != nil {
		return Checkpoint{}, err
	}
	for _, m := range marks {
		cp.TenantID = m.tenant
		if m.token == "" {
			f, _, err := getCount(ct.store, floorKey(m.tenant, endpointID))
			if err != nil {
				return Checkpoint{}, err
			}
			cp.Floor = f.last
			continue
		}
		c, ok, err := getCount(ct.store, countKey(m.tenant, endpointID, []byte(m.token)))
		if err != nil {
			return Checkpoint{}, err
		}
		if ok && c.unchecked() {
			cp.Counts = append(cp.Counts, Count{Token: []byte(m.token), TokenKey: c.tokenKey, Sequence: c.last})
		}
	}
	return cp, nil
}

// oldestUnchecked reads since when an endpoint's oldest unchecked count
// has waited; ok is false when it has none.
func (ct *counter) oldestUnchecked(endpointID string) (time.Time, bool, error) {
	prefix := uncheckedPrefix(endpointID)
	var since time.Time
	found := false
	err := ct.store.ScanPrefix(prefix, func(k, _ []byte) (bool, error) {
		t, _, err := projections.ReadTime(k[len(prefix):])
		since, found = t, err == nil
		return false, err
	})
	return since, found, err
}

// loadUnchecked reads the unchecked summaries of partition p into m.
func (ct *counter) loadUnchecked(p events.Partition, m map[string]time.Time) error {
	pp := binary.BigEndian.AppendUint16([]byte{'u'}, uint16(p))
	it, err := ct.store.NewIter(pp, projections.PrefixEnd(pp))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; {
		ep, rest, err := projections.ReadString(it.Key()[len(pp):])
		if err != nil {
			return err
		}
		since, _, err := projections.ReadTime(rest)
		if err != nil {
			return err
		}
		m[ep] = since
		ok = it.SeekGE(projections.PrefixEnd(uncheckedPrefix(ep)))
	}
	return nil
}
