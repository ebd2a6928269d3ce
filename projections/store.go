package projections

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Store is one projection's part of the node's projection database. Every
// key it reads or writes is scoped under the projection's own prefix, so
// projections cannot see or clobber each other's keys. Reads see every
// committed batch. A Store is safe for concurrent use; it is valid until the
// [Runner] that made it is closed.
type Store struct {
	view
	r *Runner
}

// view reads one projection's keys, in the committed store or in a batch
// (which sees its own writes too).
type view struct {
	rd     pebble.Reader
	prefix []byte
}

// Get returns a copy of the value stored under key; ok is false when there
// is none.
func (v view) Get(key []byte) (value []byte, ok bool, err error) {
	val, c, err := v.rd.Get(scoped(v.prefix, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get: %w", err)
	}
	out := append([]byte(nil), val...)
	_ = c.Close()
	return out, true, nil
}

// NewIter returns an iterator over the keys in [lower, upper); a nil lower
// or upper leaves that side open (bounded by the projection's namespace).
// A batch's iterator sees its writes as of the call. The caller must Close
// it.
func (v view) NewIter(lower, upper []byte) (*Iter, error) {
	o := &pebble.IterOptions{LowerBound: scoped(v.prefix, lower), UpperBound: PrefixEnd(v.prefix)}
	if upper != nil {
		o.UpperBound = scoped(v.prefix, upper)
	}
	it, err := v.rd.NewIter(o)
	if err != nil {
		return nil, fmt.Errorf("new iterator: %w", err)
	}
	return &Iter{it: it, prefix: v.prefix}, nil
}

// Scan calls fn with each entry in [lower, upper), in key order, until fn
// returns false or an error; it returns that error, or one met while
// iterating. A nil lower or upper leaves that side open.
func (v view) Scan(lower, upper []byte, fn ScanFunc) error {
	it, err := v.NewIter(lower, upper)
	if err != nil {
		return err
	}
	return it.scan(fn)
}

// ScanPrefix is Scan over every key that starts with prefix.
func (v view) ScanPrefix(prefix []byte, fn ScanFunc) error {
	return v.Scan(prefix, PrefixEnd(prefix), fn)
}

// IDs returns the string that follows prefix in every key that starts with
// prefix, in key order: the ids of an index whose keys are prefix and an id
// encoded with [AppendString].
func (v view) IDs(prefix []byte) ([]string, error) {
	var ids []string
	err := v.ScanPrefix(prefix, func(key, _ []byte) (bool, error) {
		id, _, err := ReadString(key[len(prefix):])
		if err != nil {
			return false, err
		}
		ids = append(ids, id)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Update runs fn on a new batch and commits it, serialised with the runner's
// batches: no event is applied between fn's reads and the commit. Use it for
// maintenance outside the event flow (retention); keep fn short, since the
// runner waits for it. Hooks registered with [Batch.OnCommit] run after the
// commit.
func (s *Store) Update(fn func(b *Batch) error) error {
	r := s.r
	r.applyMu.Lock()
	if r.closed {
		r.applyMu.Unlock()
		return ErrClosed
	}
	pb := r.db.NewIndexedBatch()
	var hooks []func()
	b := newBatch(pb, s.prefix, &hooks)
	err := fn(&b)
	if err == nil && !pb.Empty() {
		if cerr := pb.Commit(pebble.NoSync); cerr != nil {
			err = fmt.Errorf("commit: %w", cerr)
		}
	}
	_ = pb.Close()
	r.applyMu.Unlock()
	if err != nil {
		return err
	}
	for _, h := range hooks {
		h()
	}
	return nil
}

// Batch is the write set of one commit, scoped to one projection's keys. Its
// reads see its own writes, so an Apply can read what an earlier event of the
// same batch wrote. It is not safe for concurrent use and is valid only
// during the Apply (or Update) call that received it.
type Batch struct {
	view
	b     *pebble.Batch // the batch written through, when st is nil
	hooks *[]func()
	buf   []byte
	// st, when set, holds the writes until the commit (see staging); the
	// runner's commits use one, shared by every projection's Batch.
	st *staging
}

// newBatch is a Batch that writes through to pb, an indexed batch.
func newBatch(pb *pebble.Batch, prefix []byte, hooks *[]func()) Batch {
	return Batch{view: view{rd: pb, prefix: prefix}, b: pb, hooks: hooks}
}

// newStagedBatch is a Batch whose writes st holds until the commit.
func newStagedBatch(st *staging, prefix []byte, hooks *[]func()) Batch {
	return Batch{view: view{prefix: prefix}, hooks: hooks, st: st}
}

// Get returns a copy of the value stored under key, as this batch's writes
// left it; ok is false when there is none.
func (b *Batch) Get(key []byte) (value []byte, ok bool, err error) {
	if b.st == nil {
		return b.view.Get(key)
	}
	if v, ok, found := b.st.get(b.key(key)); found {
		return append([]byte(nil), v...), ok, nil
	}
	return view{rd: b.st.reader(), prefix: b.prefix}.Get(key)
}

// iterable is the view an iterator reads: the Pebble batch, with every
// write so far in it.
func (b *Batch) iterable() (view, error) {
	if b.st == nil {
		return b.view, nil
	}
	if err := b.st.spill(); err != nil {
		return view{}, err
	}
	return view{rd: b.st.pb, prefix: b.prefix}, nil
}

// NewIter is view.NewIter over the batch's writes so far.
func (b *Batch) NewIter(lower, upper []byte) (*Iter, error) {
	v, err := b.iterable()
	if err != nil {
		return nil, err
	}
	return v.NewIter(lower, upper)
}

// Scan is view.Scan over the batch's writes so far.
func (b *Batch) Scan(lower, upper []byte, fn ScanFunc) error {
	v, err := b.iterable()
	if err != nil {
		return err
	}
	return v.Scan(lower, upper, fn)
}

// ScanPrefix is Scan over every key that starts with prefix.
func (b *Batch) ScanPrefix(prefix []byte, fn ScanFunc) error {
	return b.Scan(prefix, PrefixEnd(prefix), fn)
}

// IDs is view.IDs over the batch's writes so far.
func (b *Batch) IDs(prefix []byte) ([]string, error) {
	v, err := b.iterable()
	if err != nil {
		return nil, err
	}
	return v.IDs(prefix)
}

// Set writes value under key. The batch copies both.
func (b *Batch) Set(key, value []byte) error {
	if b.st != nil {
		b.st.set(b.key(key), value)
		return nil
	}
	if err := b.b.Set(b.key(key), value, nil); err != nil {
		return fmt.Errorf("set: %w", err)
	}
	return nil
}

// Delete removes key.
func (b *Batch) Delete(key []byte) error {
	if b.st != nil {
		b.st.delete(b.key(key))
		return nil
	}
	if err := b.b.Delete(b.key(key), nil); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// SingleDelete removes key, which must have been Set exactly once since it
// was last deleted (never overwritten): then the Set and the delete vanish
// together at the first flush or compaction that sees both, where a Delete
// leaves a tombstone behind until a compaction reaches the bottom of the
// store. A key that was overwritten and then single-deleted may come back:
// use it only for keys whose writer keeps that discipline, and say so.
func (b *Batch) SingleDelete(key []byte) error {
	if b.st != nil {
		b.st.singleDelete(b.key(key))
		return nil
	}
	if err := b.b.SingleDelete(b.key(key), nil); err != nil {
		return fmt.Errorf("single delete: %w", err)
	}
	return nil
}

// DeleteRange removes every key in [start, end); a nil end means the end of
// the projection's namespace. It writes one range tombstone, whatever the
// number of keys.
func (b *Batch) DeleteRange(start, end []byte) error {
	pb := b.b
	if b.st != nil {
		// Reads after it must see the range gone: the batch is indexed.
		if err := b.st.spill(); err != nil {
			return err
		}
		pb = b.st.pb
	}
	lo := scoped(b.prefix, start)
	hi := PrefixEnd(b.prefix)
	if end != nil {
		hi = scoped(b.prefix, end)
	}
	if err := pb.DeleteRange(lo, hi, nil); err != nil {
		return fmt.Errorf("delete range: %w", err)
	}
	return nil
}

// OnCommit registers fn to run once the batch has committed (never if it
// does not), on the runner's goroutine, before the runner's position
// advances: a WaitFor that returns has seen fn's effects. fn must not block:
// it delays every projection.
func (b *Batch) OnCommit(fn func()) { *b.hooks = append(*b.hooks, fn) }

func (b *Batch) key(key []byte) []byte {
	b.buf = append(append(b.buf[:0], b.prefix...), key...)
	return b.buf
}

// Iter walks a range of one projection's keys, in key order. Keys and values
// are valid until the next move. It is not safe for concurrent use.
type Iter struct {
	it     *pebble.Iterator
	prefix []byte
}

// First moves to the first key; it reports whether there is one.
func (i *Iter) First() bool { return i.it.First() }

// Last moves to the last key.
func (i *Iter) Last() bool { return i.it.Last() }

// SeekGE moves to the first key >= key.
func (i *Iter) SeekGE(key []byte) bool { return i.it.SeekGE(scoped(i.prefix, key)) }

// SeekLT moves to the last key < key.
func (i *Iter) SeekLT(key []byte) bool { return i.it.SeekLT(scoped(i.prefix, key)) }

// Next moves to the next key.
func (i *Iter) Next() bool { return i.it.Next() }

// Prev moves to the previous key.
func (i *Iter) Prev() bool { return i.it.Prev() }

// Valid reports whether the iterator is at a key.
func (i *Iter) Valid() bool { return i.it.Valid() }

// Key returns the current key, without the projection's prefix.
func (i *Iter) Key() []byte { return i.it.Key()[len(i.prefix):] }

// Value returns the current value.
func (i *Iter) Value() ([]byte, error) { return i.it.ValueAndErr() }

// Error returns any error met while iterating.
func (i *Iter) Error() error { return i.it.Error() }

// Close releases the iterator and returns any error met while iterating.
func (i *Iter) Close() error { return i.it.Close() }

// ScanFunc is called by a scan with one entry: its key, without the
// projection's prefix, and its value, both valid only during the call (clone
// them to keep them). It returns whether to go on, or an error that stops
// the scan and that the scan returns.
type ScanFunc func(key, value []byte) (more bool, err error)

// scan runs fn over the iterator's entries and closes it.
func (i *Iter) scan(fn ScanFunc) error {
	var err error
	for ok := i.First(); ok; ok = i.Next() {
		var v []byte
		if v, err = i.Value(); err != nil {
			break
		}
		var more bool
		if more, err = fn(i.Key(), v); err != nil || !more {
			break
		}
	}
	if cerr := i.Close(); err == nil {
		err = cerr
	}
	return err
}

func scoped(prefix, key []byte) []byte {
	return append(append(make([]byte, 0, len(prefix)+len(key)), prefix...), key...)
}
