package projections

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// staging holds the writes of one commit in memory and writes only their
// net effect to the Pebble batch, so that a key set and single-deleted
// within the same commit costs nothing in the store. A delivery planned
// and ended within one batch of records (a catch-up's pages, a standby's
// deferred records) is then never written to the due index, and its
// history record and status entries are written once, as they end. The
// memtable's skiplist inserts were the largest single cost of applying a
// record (a profile of three loaded nodes: 14 % of their CPU), and a
// standby pays them for every record it follows.
//
// Reads see the staged writes (Batch.Get looks here first, then the
// store). An iterator over the batch sees them once they are written, so
// opening one writes what is staged first (spill); writes after that are
// staged again. The Pebble batch is a plain one until then: an indexed
// batch keeps a skiplist of its writes for reads, which a commit that
// reads only through its staged writes never needs (most never open an
// iterator: a profile of three loaded nodes had that skiplist's inserts
// at 3 % of their CPU).
type staging struct {
	db      *pebble.DB
	pb      *pebble.Batch // this commit's writes once flushed
	indexed bool          // pb is indexed: it holds writes a read must see
	ops     map[string]*stagedOp
}

// stagedOp is the net effect of a commit's writes to one key: a delete of
// what the store held (del), then, when set, a Set of val.
type stagedOp struct {
	del stagedDelete
	set bool
	val []byte
}

type stagedDelete uint8

const (
	noDelete stagedDelete = iota
	singleDelete
	plainDelete
)

// newStaging starts a commit's staged writes on db; close it when the
// commit is done.
func newStaging(db *pebble.DB) *staging {
	return &staging{db: db, pb: db.NewBatch(), ops: make(map[string]*stagedOp)}
}

// reader is what a read that the staged writes do not answer reads: the
// store while the Pebble batch holds none of this commit's writes, the
// batch (which reads through to the store) once it does.
func (s *staging) reader() pebble.Reader {
	if s.indexed {
		return s.pb
	}
	return s.db
}

// spill writes what is staged to the Pebble batch for a reader that needs
// it there (an iterator, a range delete), making the batch an indexed one
// first, with what it held.
func (s *staging) spill() error {
	if !s.indexed {
		ib := s.db.NewIndexedBatch()
		if err := ib.Apply(s.pb, nil); err != nil {
			_ = ib.Close()
			return fmt.Errorf("index the projections' batch: %w", err)
		}
		_ = s.pb.Close()
		s.pb, s.indexed = ib, true
	}
	return s.flush()
}

// close releases the Pebble batch.
func (s *staging) close() { _ = s.pb.Close() }

// get returns what the staged writes say of key: found says there is a
// staged write; then ok says whether the key holds value.
func (s *staging) get(key []byte) (value []byte, ok, found bool) {
	op, found := s.ops[string(key)]
	if !found {
		return nil, false, false
	}
	if op.set {
		return op.val, true, true
	}
	return nil, false, op.del != noDelete
}

func (s *staging) set(key, value []byte) {
	op, ok := s.ops[string(key)]
	if !ok {
		op = &stagedOp{}
		s.ops[string(key)] = op
	}
	op.set, op.val = true, append(op.val[:0], value...)
}

// singleDelete stages a single delete of key. A key set once within this
// commit and never deleted in it was absent before (single-deleted keys are
// set once between deletes: see Batch.SingleDelete), so both vanish here.
func (s *staging) singleDelete(key []byte) {
	op, ok := s.ops[string(key)]
	switch {
	case !ok:
		s.ops[string(key)] = &stagedOp{del: singleDelete}
	case op.set && op.del == noDelete:
		delete(s.ops, string(key))
	default:
		op.set, op.val = false, op.val[:0]
		if op.del == noDelete {
			op.del = singleDelete
		}
	}
}

func (s *staging) delete(key []byte) {
	op, ok := s.ops[string(key)]
	if !ok {
		s.ops[string(key)] = &stagedOp{del: plainDelete}
		return
	}
	op.del, op.set, op.val = plainDelete, false, op.val[:0]
}

// flush writes the staged writes to the Pebble batch and forgets them:
// the end of a commit (see spill for a flush before it).
func (s *staging) flush() error {
	for k, op := range s.ops {
		key := []byte(k)
		var err error
		switch op.del {
		case singleDelete:
			err = s.pb.SingleDelete(key, nil)
		case plainDelete:
			err = s.pb.Delete(key, nil)
		}
		if err == nil && op.set {
			err = s.pb.Set(key, op.val, nil)
		}
		if err != nil {
			return fmt.Errorf("write staged %q: %w", k, err)
		}
	}
	clear(s.ops)
	return nil
}
