package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// BenchmarkPublishFilters measures publishing throughput through the real
// node's gRPC API (16 callers, 1.5 KB JSON events, fan-out 4) for a tenant
// whose four endpoints have no filter and for one whose four endpoints
// each have a filter that reads the payload and a header (and passes, so
// both plans are the same size). The endpoints are paused: their
// deliveries are planned and held, so attempts do not compete with the
// publishes for the machine. The two tenants alternate on one node, a
// round of each per 32 events, so that the machine's noise falls on both; it
// reports events/s of each and the median of the pairs' ratios.
//
//	go test -run XXX -bench PublishFilters -benchtime 4000x ./node/e2e
func BenchmarkPublishFilters(b *testing.B) {
	n := clienttest.Start(b, clienttest.Options{})
	payload := []byte(`{"invoice":"inv_1001","amount":4200,"currency":"EUR","customer":{"id":"cus_9","vip":true,"country":"DE"},` +
		`"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"SKU-1","qty":1,"price":100},`, 20), ",") + `],"note":"` + strings.Repeat("x", 600) + `"}`)
	filters := []string{
		`data.amount >= 1000 && data.currency == "EUR"`,
		`headers["x-region"] == "eu" && data.customer.country in ["DE", "FR"]`,
		`data.items.exists(i, i.sku.startsWith("SKU-"))`,
		`type == "invoice.paid" && has(data.customer.vip)`,
	}
	tenants := map[string]*client.Client{}
	for _, name := range []string{"plain", "filtered"} {
		c := n.Client(b, n.Tenant(b, name))
		for i := range 4 {
			s := &controlv1.EndpointSettings{Url: fmt.Sprintf("http://127.0.0.1:1/%s/%d", name, i), EventTypes: []string{"invoice.paid"}}
			if name == "filtered" {
				s.Filter = filters[i]
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			ep, err := c.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{Settings: s})
			if err == nil {
				_, err = c.PauseEndpoint(ctx, &controlv1.PauseEndpointRequest{EndpointId: ep.GetEndpoint().GetEndpointId()})
			}
			cancel()
			if err != nil {
				b.Fatalf("endpoint of %s: %v", name, err)
			}
		}
		tenants[name] = c
	}
	const callers = 16
	var seq atomic.Int64
	// round publishes per events of tenant name and returns how long it took.
	round := func(name string, per int) time.Duration {
		c := tenants[name]
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Value
		for w := range callers {
			wg.Go(func() {
				for i := w; i < per; i += callers {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					res, err := c.Publish(ctx, client.Event{
						ID: fmt.Sprintf("%s_%d", name, seq.Add(1)), Type: "invoice.paid", Payload: payload,
						Headers: map[string]string{"x-region": "eu"},
					})
					cancel()
					if err == nil && len(res.GetDeliveries()) != 4 {
						err = fmt.Errorf("planned %d deliveries, filtered %d; want 4", len(res.GetDeliveries()), len(res.GetFiltered()))
					}
					if err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	round("plain", 200) // warm up: connections, caches, the filters' compilation
	round("filtered", 200)
	b.ResetTimer()
	// Rounds of 32 events each, in pairs: the ratio of each pair's rates,
	// and their median, so that the load of the machine's other work
	// falls on both sides of a pair.
	const per = 32
	var plain, filtered time.Duration
	var ratios []float64
	for range (b.N + per - 1) / per {
		p, f := round("plain", per), round("filtered", per)
		plain, filtered = plain+p, filtered+f
		ratios = append(ratios, p.Seconds()/f.Seconds())
	}
	slices.Sort(ratios)
	rounds := float64(len(ratios))
	b.ReportMetric(rounds*per/plain.Seconds(), "plain_events/s")
	b.ReportMetric(rounds*per/filtered.Seconds(), "filtered_events/s")
	b.ReportMetric(ratios[len(ratios)/2], "median_filtered/plain")
}
