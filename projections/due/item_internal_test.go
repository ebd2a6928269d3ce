package due

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var sampleItem = Item{
	DeliveryID: "dlv_0b4f7d0e-6a1c-5d7e-9f00-1c2d3e4f5a6b", TenantID: "acme", EventID: "evt_000123",
	EventType: "invoice.paid", EndpointID: "ep_01HZX3K", ConfigVersion: 3, Class: ClassRetry, Manual: true,
	DueAt:     time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	PlannedAt: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC),
	ExpiresAt: time.Date(2026, 1, 3, 3, 0, 0, 0, time.UTC),
	Attempts:  2,
}

func TestItemEncoding(t *testing.T) {
	zeroTimes := sampleItem
	zeroTimes.PlannedAt, zeroTimes.ExpiresAt, zeroTimes.EventType, zeroTimes.Manual = time.Time{}, time.Time{}, "", false
	for name, it := range map[string]Item{"full": sampleItem, "zero times and empty strings": zeroTimes, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeItem(encodeItem(nil, &it))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(it, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("truncated", func(t *testing.T) {
		v := encodeItem(nil, &sampleItem)
		for n := range len(v) {
			if _, err := decodeItem(v[:n]); err == nil {
				t.Fatalf("decoding %d of %d bytes succeeded", n, len(v))
			}
		}
	})
}

// BenchmarkItemCodec compares the item encodings: every pull decodes each
// item it returns, and every planned delivery encodes one.
func BenchmarkItemCodec(b *testing.B) {
	b.Run("codec=json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := json.Marshal(sampleItem)
			var it Item
			if err := json.Unmarshal(v, &it); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=binary", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = encodeItem(buf[:0], &sampleItem)
			if _, err := decodeItem(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
