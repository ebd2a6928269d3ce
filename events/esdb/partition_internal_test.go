package esdb

import (
	"bytes"
	"testing"

	"github.com/hookline/hookline/events"
)

func TestPartitionInMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta string
		p    events.Partition
		want string // as stored
	}{
		{"NoPartitionUntouched", `{"a":1}`, 0, `{"a":1}`},
		{"ObjectGainsAMember", `{"content_type":"x"}`, 17, `{"hookline_partition":17,"content_type":"x"}`},
		{"EmptyObject", `{}`, 1, `{"hookline_partition":1,"hookline_metadata":"e30="}`},
		{"Empty", ``, 256, `{"hookline_partition":256,"hookline_metadata":""}`},
		{"NotAnObject", `[1]`, 9, `{"hookline_partition":9,"hookline_metadata":"WzFd"}`},
		{"LooksLikeOurs", `{"hookline_partition":3}`, 4, `{"hookline_partition":4,"hookline_metadata":"eyJob29rbGluZV9wYXJ0aXRpb24iOjN9"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var meta []byte
			if tc.meta != "" {
				meta = []byte(tc.meta)
			}
			stored := withPartition(meta, tc.p)
			if string(stored) != tc.want {
				t.Errorf("stored %s, want %s", stored, tc.want)
			}
			back, p := splitPartition(stored)
			if p != tc.p || !bytes.Equal(back, meta) {
				t.Errorf("read back %q partition %d, want %q partition %d", back, p, meta, tc.p)
			}
		})
	}
}
