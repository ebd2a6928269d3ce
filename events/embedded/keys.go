package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
)

// Key prefixes, one byte each; see the key layout in doc.go.
const (
	prefixLog   byte = 'l' // l seq                   -> record
	prefixIndex byte = 's' // s uvarint(len) stream rev -> seq id
	prefixHead  byte = 'h' // h stream                -> rev written
	prefixTime  byte = 't' // t written stream        -> (empty), expiring streams only
	prefixMeta  byte = 'm' // m name                  -> value
)

// keyLastSeq holds the last sequence number ever assigned, so that a sequence
// is never reused even when retention dropped the newest events.
var keyLastSeq = []byte{prefixMeta, 's', 'e', 'q'}

// The first byte of every stored record is its layout's version: 1 before
// partitions, 2 with the partition after it.
const (
	recordV1      = 1
	recordVersion = 2
)

// errCorrupt marks a key or value that does not decode.
var errCorrupt = errors.New("embedded: corrupt entry")

func logKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// logUpper is the exclusive upper bound of the global log.
var logUpper = []byte{prefixLog + 1}

func seqOfLogKey(k []byte) (uint64, error) {
	if len(k) != 9 || k[0] != prefixLog {
		return 0, fmt.Errorf("%w: log key %x", errCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// indexPrefix is the prefix of every index key of stream. The length makes
// it prefix-free: no stream's keys fall inside another stream's range.
func indexPrefix(stream string) []byte {
	k := make([]byte, 0, 1+binary.MaxVarintLen64+len(stream)+8)
	k = append(k, prefixIndex)
	k = binary.AppendUvarint(k, uint64(len(stream)))
	return append(k, stream...)
}

func indexKey(stream string, rev events.Revision) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(stream), uint64(rev))
}

// indexUpper is the exclusive upper bound of stream's index keys.
func indexUpper(stream string) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(stream), ^uint64(0))
}

func revOfIndexKey(k []byte) (events.Revision, error) {
	if len(k) < 9 {
		return 0, fmt.Errorf("%w: index key %x", errCorrupt, k)
	}
	return events.Revision(binary.BigEndian.Uint64(k[len(k)-8:])), nil
}

// indexEntry is the value of an index key.
type indexEntry struct {
	seq uint64
	id  uuid.UUID
}

func encodeIndex(e indexEntry) []byte {
	v := make([]byte, 24)
	binary.BigEndian.PutUint64(v, e.seq)
	copy(v[8:], e.id[:])
	return v
}

func decodeIndex(v []byte) (indexEntry, error) {
	if len(v) != 24 {
		return indexEntry{}, fmt.Errorf("%w: index value of %d bytes", errCorrupt, len(v))
	}
	var e indexEntry
	e.seq = binary.BigEndian.Uint64(v)
	copy(e.id[:], v[8:])
	return e, nil
}

func headKey(stream string) []byte {
	return append([]byte{prefixHead}, stream...)
}

// head is the state of a stream: its last revision and last write time.
type head struct {
	rev     events.Revision
	written time.Time
}

func encodeHead(h head) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(h.rev))
	binary.BigEndian.PutUint64(v[8:], uint64(h.written.UnixNano()))
	return v
}

func decodeHead(v []byte) (head, error) {
	if len(v) != 16 {
		return head{}, fmt.Errorf("%w: head value of %d bytes", errCorrupt, len(v))
	}
	return head{
		rev:     events.Revision(binary.BigEndian.Uint64(v)),
		written: time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))),
	}, nil
}

// timeBits orders times as unsigned big-endian integers, negative ones first.
func timeBits(t time.Time) uint64 { return uint64(t.UnixNano()) ^ (1 << 63) }

func timeKey(written time.Time, stream string) []byte {
	k := make([]byte, 9, 9+len(stream))
	k[0] = prefixTime
	binary.BigEndian.PutUint64(k[1:], timeBits(written))
	return append(k, stream...)
}

// timeUpper is the exclusive upper bound of the time keys written before t.
func timeUpper(t time.Time) []byte {
	k := make([]byte, 9)
	k[0] = prefixTime
	binary.BigEndian.PutUint64(k[1:], timeBits(t))
	return k
}

func decodeTimeKey(k []byte) (time.Time, string, error) {
	if len(k) < 9 || k[0] != prefixTime {
		return time.Time{}, "", fmt.Errorf("%w: time key %x", errCorrupt, k)
	}
	nanos := int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63))
	return time.Unix(0, nanos), string(k[9:]), nil
}

// encodeRecord lays out a record as: version (2), uvarint partition, uvarint
// len + stream, revision (8), id (16), recorded unix nanos (8), uvarint len +
// type, uvarint len + metadata, then data up to the end. Version 1, written
// before partitions, has no partition.
func encodeRecord(stream string, rev events.Revision, recorded time.Time, ev *events.Event) []byte {
	n := 1 + 4*binary.MaxVarintLen64 + len(stream) + 32 + len(ev.Type) + len(ev.Metadata) + len(ev.Data)
	v := make([]byte, 0, n)
	v = append(v, recordVersion)
	v = binary.AppendUvarint(v, uint64(ev.Partition))
	v = binary.AppendUvarint(v, uint64(len(stream)))
	v = append(v, stream...)
	v = binary.BigEndian.AppendUint64(v, uint64(rev))
	v = append(v, ev.ID[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(recorded.UnixNano()))
	v = binary.AppendUvarint(v, uint64(len(ev.Type)))
	v = append(v, ev.Type...)
	v = binary.AppendUvarint(v, uint64(len(ev.Metadata)))
	v = append(v, ev.Metadata...)
	return append(v, ev.Data...)
}

// decodeRecord decodes a record stored at seq. It copies everything it keeps,
// so v may be reused afterwards.
func decodeRecord(seq uint64, v []byte) (events.Record, error) {
	bad := func(what string) (events.Record, error) {
		return events.Record{}, fmt.Errorf("%w: record %d: %s", errCorrupt, seq, what)
	}
	v, part, ok := recordBody(v)
	if !ok {
		return bad("unknown version")
	}
	str := func() (string, bool) {
		n, k := binary.Uvarint(v)
		if k <= 0 || uint64(len(v)-k) < n {
			return "", false
		}
		s := string(v[k : k+int(n)])
		v = v[k+int(n):]
		return s, true
	}
	stream, ok := str()
	if !ok || len(v) < 32 {
		return bad("stream")
	}
	r := events.Record{
		Stream:    stream,
		Revision:  events.Revision(binary.BigEndian.Uint64(v)),
		Position:  events.Position{Commit: seq, Prepare: seq},
		Partition: part,
	}
	copy(r.ID[:], v[8:24])
	r.Recorded = time.Unix(0, int64(binary.BigEndian.Uint64(v[24:32])))
	v = v[32:]
	if r.Type, ok = str(); !ok {
		return bad("type")
	}
	meta, ok := str()
	if !ok {
		return bad("metadata")
	}
	if len(meta) > 0 {
		r.Metadata = []byte(meta)
	}
	if len(v) > 0 {
		r.Data = append([]byte(nil), v...)
	}
	return r, nil
}

// recordBody returns what follows a record's version and partition, and the
// partition; ok=false for an unknown version.
func recordBody(v []byte) (body []byte, p events.Partition, ok bool) {
	switch {
	case len(v) > 0 && v[0] == recordV1:
		return v[1:], events.NoPartition, true
	case len(v) > 0 && v[0] == recordVersion:
		n, k := binary.Uvarint(v[1:])
		if k <= 0 || n > events.Partitions {
			return nil, 0, false
		}
		return v[1+k:], events.Partition(n), true
	}
	return nil, 0, false
}

// peekRecord returns the partition, stream and type of an encoded record
// without copying its payload; ok=false when it does not decode.
func peekRecord(v []byte) (p events.Partition, stream, typ []byte, ok bool) {
	v, p, ok = recordBody(v)
	if !ok {
		return 0, nil, nil, false
	}
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n+32 {
		return 0, nil, nil, false
	}
	stream = v[k : k+int(n)]
	v = v[k+int(n)+32:]
	n, k = binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return 0, nil, nil, false
	}
	return p, stream, v[k : k+int(n)], true
}

func beUint64(v []byte) uint64 { return binary.BigEndian.Uint64(v) }

func beBytes(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
