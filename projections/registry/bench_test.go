package registry_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// BenchmarkEndpointsForType measures planning's read of the registry when
// its answer is not in memory (a new type each time): one short range per
// entry that can match, so a type of more segments reads more ranges, most
// of them empty. The tenant has 100 endpoints: 60 subscribed to
// invoice.paid, 20 to order.*, 20 to "*"; the types asked are under a
// prefix no endpoint names, so the "*" endpoints answer.
func BenchmarkEndpointsForType(b *testing.B) {
	f := newFixture(b)
	f.emit(events.TenantStream("acme"), &hooklinev1.TenantCreated{TenantId: "acme", Name: "Acme", Quota: &hooklinev1.Quota{}})
	for i := range 100 {
		typ := "invoice.paid"
		switch i % 5 {
		case 0:
			typ = "order.*"
		case 1:
			typ = "*"
		}
		id := fmt.Sprintf("ep%03d", i)
		f.emit(events.EndpointStream(id), endpoint("acme", id, 1, typ))
	}
	reg, _ := f.open(vfs.NewMem())
	for _, segs := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("segments=%d", segs), func(b *testing.B) {
			prefix := "billing." + strings.Repeat("x.", segs-2)
			for i := 0; b.Loop(); i++ {
				refs, err := reg.EndpointsForType("acme", fmt.Sprintf("%st%d", prefix, i))
				if err != nil || len(refs) != 20 {
					b.Fatalf("%d refs, %v; want the 20 of \"*\"", len(refs), err)
				}
			}
		})
	}
}
