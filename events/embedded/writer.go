package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hookline/hookline/events"
)

// Group commit limits: a group stops growing at maxGroup appends or
// maxGroupBytes of payload, whichever comes first.
const (
	maxGroup      = 1024
	maxGroupBytes = 32 << 20
)

// errStaging marks a failure to fill the batch after part of an append was
// staged in it; the whole group then fails rather than commit half an append.
var errStaging = errors.New("embedded: stage batch")

// appendReq is one Append waiting for the writer.
type appendReq struct {
	stream   string
	expected events.ExpectedRevision
	evs      []events.Event
	size     int

	res  events.AppendResult
	err  error
	done chan struct{} // closed by the writer once res and err are set
}

// job is work that must not interleave with appends: retention deletes. fn
// fills the batch; the writer commits it.
type job struct {
	fn   func(b *pebble.Batch) error
	done chan error // buffered, 1
}

// Append writes evs to the end of stream atomically and returns once they
// are synced to disk. See events.Log. ctx bounds the wait for the writer to
// take the append; once taken, Append waits for the commit's outcome.
func (l *Log) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if err := events.CheckAppend(stream, l.cfg.MaxEventSize, evs); err != nil {
		return events.AppendResult{}, err
	}
	if expected == nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w: no expected revision", stream, events.ErrInvalid)
	}
	req := &appendReq{stream: stream, expected: expected, evs: evs, done: make(chan struct{})}
	for i := range evs {
		req.size += len(evs[i].Data) + len(evs[i].Metadata)
	}
	select {
	case l.appends <- req:
	case <-l.quit:
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, events.ErrClosed)
	case <-ctx.Done():
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, ctx.Err())
	}
	// Once the writer has the request, wait for its outcome whatever ctx
	// does: it is at most one group commit away, the caller learns for sure
	// whether the events were written, and the writer never reads evs after
	// Append returned.
	<-req.done
	return req.res, req.err
}

// write is the writer goroutine, the only one that writes to the store. It
// takes appends in groups: one waiting append, then every other append
// already waiting (appends is unbuffered, so those are the callers blocked in
// Append while the previous group synced), validated in order against the
// store plus the group's own earlier writes, committed in one synced batch.
func (l *Log) write() {
	defer close(l.writerDone)
	group := make([]*appendReq, 0, maxGroup)
	for {
		select {
		case <-l.quit:
			return
		case j := <-l.jobs:
			j.done <- l.runJob(j)
		case r := <-l.appends:
			group = append(group[:0], r)
			size := r.size
		drain:
			for len(group) < maxGroup && size < maxGroupBytes {
				select {
				case r := <-l.appends:
					group = append(group, r)
					size += r.size
				default:
					break drain
				}
			}
			l.commitGroup(group)
			clear(group)
		}
	}
}

// commitGroup stages every append of group that holds, commits them in one
// synced batch and answers each caller.
func (l *Log) commitGroup(group []*appendReq) {
	b := l.db.NewIndexedBatch()
	defer b.Close()
	now := l.cfg.Now()
	first := l.seq.Load()
	seq := first
	l.heads.begin()
	var err error
	for _, r := range group {
		r.res, r.err = l.stage(b, r, &seq, now)
		if errors.Is(r.err, errStaging) {
			// The batch may hold part of r: commit none of the group.
			err = r.err
			break
		}
	}
	if seq != first || err != nil {
		if err == nil {
			err = b.Set(keyLastSeq, beBytes(seq), nil)
		}
		if err == nil {
			err = b.Commit(pebble.Sync)
		}
		if err != nil {
			for _, r := range group {
				if r.err == nil {
					r.res, r.err = events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err)
				}
			}
		} else {
			l.heads.commit()
			l.seq.Store(seq)
			l.stats.groups.Add(1)
			l.stats.events.Add(seq - first)
			for _, r := range group {
				if r.err == nil {
					l.stats.appends.Add(1)
				}
			}
			l.broadcast()
		}
	}
	for _, r := range group {
		close(r.done)
	}
}

// stage checks r's expected revision against b (the store plus the group's
// earlier writes) and, when it holds, writes r's events to b, advancing seq.
// A failing append writes nothing. An append whose event ids are already at
// the expected place writes nothing and returns the original result.
func (l *Log) stage(b *pebble.Batch, r *appendReq, seq *uint64, now time.Time) (events.AppendResult, error) {
	h, exists, err := l.heads.get(b, r.stream)
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, err)
	}
	wrong := func() (events.AppendResult, error) {
		return events.AppendResult{}, &events.WrongRevisionError{Stream: r.stream, Expected: r.expected, Actual: h.rev, Exists: exists}
	}
	n := events.Revision(len(r.evs))
	var next events.Revision // revision of the first new event
	switch e := r.expected.(type) {
	case events.Any:
		if exists {
			if res, ok, err := l.already(b, r, h, h.rev+1-min(n, h.rev+1)); ok || err != nil {
				return res, err
			}
			next = h.rev + 1
		}
	case events.NoStream:
		if exists {
			if res, ok, err := l.already(b, r, h, 0); ok || err != nil {
				return res, err
			}
			return wrong()
		}
	case events.StreamExists:
		if !exists {
			return wrong()
		}
		if res, ok, err := l.already(b, r, h, h.rev+1-min(n, h.rev+1)); ok || err != nil {
			return res, err
		}
		next = h.rev + 1
	case events.Exact:
		if !exists {
			return wrong()
		}
		if h.rev != events.Revision(e) {
			if h.rev > events.Revision(e) {
				if res, ok, err := l.already(b, r, h, events.Revision(e)+1); ok || err != nil {
					return res, err
				}
			}
			return wrong()
		}
		next = h.rev + 1
	default:
		return events.AppendResult{}, fmt.Errorf("append %s: %w: expected revision %T", r.stream, events.ErrInvalid, r.expected)
	}

	for i := range r.evs {
		ev := &r.evs[i]
		*seq++
		rev := next + events.Revision(i)
		if err := errors.Join(
			b.Set(logKey(*seq), encodeRecord(r.stream, rev, now, ev), nil),
			b.Set(indexKey(r.stream, rev), encodeIndex(indexEntry{seq: *seq, id: ev.ID}), nil),
		); err != nil {
			return events.AppendResult{}, fmt.Errorf("append %s: %w: %w", r.stream, errStaging, err)
		}
	}
	last := next + n - 1
	nh := head{rev: last, written: now}
	l.heads.stage(r.stream, nh)
	err = b.Set(headKey(r.stream), encodeHead(nh), nil)
	if err == nil && events.Expires(r.stream) {
		if exists {
			err = b.Delete(timeKey(h.written, r.stream), nil)
		}
		if err == nil {
			err = b.Set(timeKey(now, r.stream), nil, nil)
		}
	}
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w: %w", r.stream, errStaging, err)
	}
	return events.AppendResult{Revision: last, Position: position(*seq)}, nil
}

// already reports whether r's events are stored in stream from revision at
// on, ids in order: then r is a retry of an append that landed, and its
// original result is returned.
func (l *Log) already(b *pebble.Batch, r *appendReq, h head, at events.Revision) (events.AppendResult, bool, error) {
	n := events.Revision(len(r.evs))
	if at+n-1 > h.rev || at+n < at {
		return events.AppendResult{}, false, nil
	}
	var e indexEntry
	for i := range r.evs {
		var err error
		e, err = readIndex(b, r.stream, at+events.Revision(i))
		if errors.Is(err, pebble.ErrNotFound) {
			return events.AppendResult{}, false, nil
		}
		if err != nil {
			return events.AppendResult{}, false, fmt.Errorf("append %s: %w", r.stream, err)
		}
		if !bytes.Equal(e.id[:], r.evs[i].ID[:]) {
			return events.AppendResult{}, false, nil
		}
	}
	return events.AppendResult{Revision: at + n - 1, Position: position(e.seq)}, true, nil
}

// runJob commits what j stages, synced.
func (l *Log) runJob(j *job) error {
	b := l.db.NewIndexedBatch()
	defer b.Close()
	if err := j.fn(b); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(pebble.Sync)
}

// broadcast wakes every subscriber waiting for a commit.
func (l *Log) broadcast() {
	l.notifyMu.Lock()
	close(l.notify)
	l.notify = make(chan struct{})
	l.notifyMu.Unlock()
}

// committed returns a channel closed at the next commit.
func (l *Log) committed() <-chan struct{} {
	l.notifyMu.Lock()
	defer l.notifyMu.Unlock()
	return l.notify
}

// WriterStats counts the writer's work since Open.
type WriterStats struct {
	// Groups is the number of batches committed for appends (one fsync each).
	Groups uint64
	// Appends is the number of appends acknowledged in them, idempotent
	// retries included; Appends/Groups is the mean group size.
	Appends uint64
	// Events is the number of events written.
	Events uint64
}

// writerStats are the counters behind [Log.WriterStats].
type writerStats struct {
	groups, appends, events atomic.Uint64
}

// WriterStats returns the writer's counters. Safe for concurrent use.
func (l *Log) WriterStats() WriterStats {
	return WriterStats{Groups: l.stats.groups.Load(), Appends: l.stats.appends.Load(), Events: l.stats.events.Load()}
}

// headCache holds the heads of the streams appended lately, as committed,
// so that an append to a stream written seconds ago (a delivery's outcomes,
// an endpoint's events) checks its expected revision without a read of the
// store. Owned by the writer goroutine, the only one that writes heads
// (retention's drops run there too, and forget theirs).
type headCache struct {
	m     map[string]head
	group map[string]head // the heads staged by the group being committed
}

// maxCachedHeads bounds the cache: when full it starts over (a miss costs
// one read of the store, as without the cache).
const maxCachedHeads = 1 << 16

func newHeadCache() *headCache {
	return &headCache{m: make(map[string]head), group: make(map[string]head)}
}

// begin starts a group: nothing staged yet.
func (c *headCache) begin() { clear(c.group) }

// stage records a head the group's batch writes.
func (c *headCache) stage(stream string, h head) { c.group[stream] = h }

// get returns stream's head as the batch b sees it: staged earlier in the
// group, cached, or read.
func (c *headCache) get(b *pebble.Batch, stream string) (head, bool, error) {
	if h, ok := c.group[stream]; ok {
		return h, true, nil
	}
	if h, ok := c.m[stream]; ok {
		return h, true, nil
	}
	return readHead(b, stream)
}

// commit takes in the group's heads once its batch is committed.
func (c *headCache) commit() {
	if len(c.m)+len(c.group) > maxCachedHeads {
		clear(c.m)
	}
	for s, h := range c.group {
		c.m[s] = h
	}
}

// forget drops stream's head (its stream is being dropped).
func (c *headCache) forget(stream string) { delete(c.m, stream) }
