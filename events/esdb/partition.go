package esdb

import (
	"bytes"
	"encoding/base64"
	"strconv"

	"github.com/hookline/hookline/events"
)

// EventStoreDB has no column for an event's delivery partition, so it
// travels in the metadata, where the server's UI shows it: an event of a
// partition is stored with its JSON metadata object opened by
// "hookline_partition" ({"hookline_partition":17,"content_type":...}), or,
// when its metadata is not a non-empty JSON object, as
// {"hookline_partition":17,"hookline_metadata":"<base64 of the metadata>"}.
// Reading strips it again, so an event reads back with the metadata it was
// appended with. Events of no partition are stored as they are.
const (
	partitionKey = `{"hookline_partition":`
	rawKey       = `,"hookline_metadata":"`
)

// withPartition returns the metadata to store for an event of partition p.
func withPartition(meta []byte, p events.Partition) []byte {
	if p == events.NoPartition {
		return meta
	}
	out := strconv.AppendUint([]byte(partitionKey), uint64(p), 10)
	if isObject(meta) && !bytes.HasPrefix(meta, []byte(partitionKey)) {
		return append(append(out, ','), meta[1:]...)
	}
	out = append(out, rawKey...)
	out = base64.StdEncoding.AppendEncode(out, meta)
	return append(out, `"}`...)
}

// splitPartition undoes withPartition: the metadata as appended and the
// event's partition.
func splitPartition(stored []byte) ([]byte, events.Partition) {
	if !bytes.HasPrefix(stored, []byte(partitionKey)) {
		return stored, events.NoPartition
	}
	rest := stored[len(partitionKey):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	p, err := strconv.ParseUint(string(rest[:n]), 10, 16)
	if err != nil || !events.Partition(p).Valid() {
		return stored, events.NoPartition
	}
	rest = rest[n:]
	if bytes.HasPrefix(rest, []byte(rawKey)) && bytes.HasSuffix(rest, []byte(`"}`)) {
		raw, err := base64.StdEncoding.DecodeString(string(rest[len(rawKey) : len(rest)-2]))
		if err != nil {
			return stored, events.NoPartition
		}
		if len(raw) == 0 {
			raw = nil
		}
		return raw, events.Partition(p)
	}
	if len(rest) == 0 || rest[0] != ',' {
		return stored, events.NoPartition
	}
	return append([]byte{'{'}, rest[1:]...), events.Partition(p)
}

// isObject reports whether meta looks like a non-empty JSON object, opened
// by its first byte: one more member can be put in front of the others.
func isObject(meta []byte) bool {
	return len(meta) > 2 && meta[0] == '{' && meta[len(meta)-1] == '}' && len(bytes.TrimSpace(meta[1:len(meta)-1])) > 0
}
