package projections

import (
	"encoding/binary"
	"fmt"

	"github.com/hookline/hookline/events"
)

// checkpoints is where a projection stands in each partition: every record
// of partition p at or before at[p] has been applied (or was not the node's
// to apply), at[events.NoPartition] for the records of no partition. A
// projection that is not partitioned uses only that one.
type checkpoints [events.Partitions + 1]events.Position

// min returns the smallest checkpoint of the partitions in s, and false
// when s is empty.
func (c *checkpoints) min(s events.PartitionSet) (events.Position, bool) {
	var m events.Position
	found := false
	s.Each(func(p events.Partition) {
		if !found || c[p].Less(m) {
			m, found = c[p], true
		}
	})
	return m, found
}

// advance moves the checkpoints of the partitions in s to pos, where they
// are behind it; it reports whether any moved.
func (c *checkpoints) advance(s events.PartitionSet, pos events.Position) bool {
	moved := false
	s.Each(func(p events.Partition) {
		if c[p].Less(pos) {
			c[p], moved = pos, true
		}
	})
	return moved
}

// Checkpoint encodings. Version 1 (16 bytes: Commit, Prepare, big-endian)
// was written before partitions, when every record was applied: it stands
// for every partition. Version 2 is a version byte, then groups of
// partitions that share a position: uvarint group count, and per group
// Commit (8), Prepare (8) and the partition set's words (8 each, as many as
// events.PartitionSet has).
const checkpointV2 = 2

func (c *checkpoints) encode() []byte {
	type group struct {
		pos events.Position
		set events.PartitionSet
	}
	var groups []group
next:
	for p := range c {
		for i := range groups {
			if groups[i].pos == c[p] {
				groups[i].set.Add(events.Partition(p))
				continue next
			}
		}
		groups = append(groups, group{pos: c[p], set: events.NewPartitionSet(events.Partition(p))})
	}
	words := len(events.PartitionSet{}.Words())
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(groups)*(16+8*words))
	b = append(b, checkpointV2)
	b = binary.AppendUvarint(b, uint64(len(groups)))
	for _, g := range groups {
		b = binary.BigEndian.AppendUint64(b, g.pos.Commit)
		b = binary.BigEndian.AppendUint64(b, g.pos.Prepare)
		for _, w := range g.set.Words() {
			b = binary.BigEndian.AppendUint64(b, w)
		}
	}
	return b
}

func decodeCheckpoints(v []byte) (checkpoints, error) {
	var c checkpoints
	if len(v) == 16 { // version 1
		pos := events.Position{Commit: binary.BigEndian.Uint64(v), Prepare: binary.BigEndian.Uint64(v[8:])}
		for p := range c {
			c[p] = pos
		}
		return c, nil
	}
	if len(v) < 2 || v[0] != checkpointV2 {
		return c, fmt.Errorf("%w: checkpoint of %d bytes", ErrBadKey, len(v))
	}
	n, k := binary.Uvarint(v[1:])
	rest := v[1+k:]
	words := len(events.PartitionSet{}.Words())
	size := 16 + 8*words
	if k <= 0 || n > events.Partitions+1 || uint64(len(rest)) != n*uint64(size) {
		return c, fmt.Errorf("%w: checkpoint groups", ErrBadKey)
	}
	ws := make([]uint64, words)
	for range n {
		pos := events.Position{Commit: binary.BigEndian.Uint64(rest), Prepare: binary.BigEndian.Uint64(rest[8:])}
		for i := range ws {
			ws[i] = binary.BigEndian.Uint64(rest[16+8*i:])
		}
		events.PartitionSetOfWords(ws).Each(func(p events.Partition) { c[p] = pos })
		rest = rest[size:]
	}
	return c, nil
}
