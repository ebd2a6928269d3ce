package due

import (
	"hash/maphash"

	"github.com/hookline/hookline/projections"
)

// seenFilter is a Bloom filter over the reverse keys of the deliveries in
// the index: when it says a delivery is not there, it is not, and a plan's
// Apply skips the lookup it would miss (a point read through the batch,
// the memtables and every level of the store: the largest share of the
// due index's apply when a profile was taken). Every put adds its key;
// deletes leave theirs, so the filter answers "maybe" for more keys than
// the index holds, and it is built again from the index once it has taken
// as many keys as it was sized for. False positives cost the lookup, never
// a wrong answer.
//
// It is built from the index before its first answer, in the batch of the
// first plan Apply sees: the index on disk may hold deliveries from before
// the process started. Only the runner's goroutine uses it.
type seenFilter struct {
	bits  []uint64
	added int // keys added since it was built, counted with those it was built from
	limit int // keys it takes before it is built again
	built bool
}

// Sizing: about ten bits per key and four probes keep false positives near
// one in a hundred; the filter takes twice the keys it was built from, and
// at least minSeenKeys, before it is built again, so a rebuild's scan of the
// index is paid for by as many puts.
const (
	seenBitsPerKey = 10
	seenProbes     = 4
	minSeenKeys    = 1 << 16
)

var seenSeed = maphash.MakeSeed()

// mayHave reports whether key may be in the index; always true before the
// filter is built.
func (f *seenFilter) mayHave(key []byte) bool {
	if !f.built {
		return true
	}
	h1, h2, m := f.probes(maphash.Bytes(seenSeed, key))
	for i := range uint64(seenProbes) {
		if bit := (h1 + i*h2) % m; f.bits[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// add notes key as put in the index.
func (f *seenFilter) add(key []byte) {
	if f.built {
		f.addHash(maphash.Bytes(seenSeed, key))
	}
}

func (f *seenFilter) addHash(h uint64) {
	h1, h2, m := f.probes(h)
	for i := range uint64(seenProbes) {
		bit := (h1 + i*h2) % m
		f.bits[bit/64] |= 1 << (bit % 64)
	}
	f.added++
}

// stale reports whether the filter must be built (again) before it
// answers.
func (f *seenFilter) stale() bool { return !f.built || f.added >= f.limit }

// build sizes the filter for the reverse keys in v and adds them; until it
// succeeds, the filter answers "maybe". It holds a hash of each key
// meanwhile, not the key.
func (f *seenFilter) build(v *projections.Batch) error {
	f.built = false
	var hashes []uint64
	err := v.ScanPrefix([]byte{'r'}, func(key, _ []byte) (bool, error) {
		hashes = append(hashes, maphash.Bytes(seenSeed, key))
		return true, nil
	})
	if err != nil {
		return err
	}
	f.reset(hashes)
	return nil
}

// reset sizes the filter for the keys of hashes and adds them.
func (f *seenFilter) reset(hashes []uint64) {
	f.limit = max(2*len(hashes), minSeenKeys)
	words := (f.limit*seenBitsPerKey + 63) / 64
	if cap(f.bits) >= words {
		f.bits = f.bits[:words]
		clear(f.bits)
	} else {
		f.bits = make([]uint64, words)
	}
	f.built, f.added = true, 0
	for _, h := range hashes {
		f.addHash(h)
	}
}

// probes returns the double-hashing pair of a key's hash and the filter's
// size in bits.
func (f *seenFilter) probes(h uint64) (h1, h2, m uint64) {
	return h, h>>32 | 1, uint64(len(f.bits)) * 64
}
