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
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// benchInvoice is a 1.5 KB JSON event.
func benchInvoice() []byte {
	return []byte(`{"invoice":"inv_1001","amount":4200,"currency":"EUR","customer":{"id":"cus_9","vip":true,"country":"DE"},` +
		`"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"SKU-1","qty":1,"price":100},`, 20), ",") + `],"note":"` + strings.Repeat("x", 600) + `"}`)
}

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
	payload := benchInvoice()
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
	publishPairs(b, tenants, "plain", "filtered", payload)
}

// publishPairs publishes payload (fan-out 4) as the tenants base and
// other in turn, 32 events a round from 16 callers, and reports the
// events/s of each and the median of the pairs' ratios (other/base), so
// that the load of the machine's other work falls on both sides of a pair.
func publishPairs(b *testing.B, tenants map[string]*client.Client, base, other string, payload []byte) {
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
	round(base, 200) // warm up: connections, caches, compiled filters and schemas
	round(other, 200)
	b.ResetTimer()
	// Rounds of 32 events each, in pairs: the ratio of each pair's rates,
	// and their median, so that the load of the machine's other work
	// falls on both sides of a pair.
	const per = 32
	var baseTime, otherTime time.Duration
	var ratios []float64
	for range (b.N + per - 1) / per {
		p, f := round(base, per), round(other, per)
		baseTime, otherTime = baseTime+p, otherTime+f
		ratios = append(ratios, p.Seconds()/f.Seconds())
	}
	slices.Sort(ratios)
	rounds := float64(len(ratios))
	b.ReportMetric(rounds*per/baseTime.Seconds(), base+"_events/s")
	b.ReportMetric(rounds*per/otherTime.Seconds(), other+"_events/s")
	b.ReportMetric(ratios[len(ratios)/2], "median_"+other+"/"+base)
}

// BenchmarkPublishSchema measures what schema enforcement costs a publish:
// as BenchmarkPublishFilters, for a tenant without a catalog and for one
// whose type has a schema the payload matches, under schema_enforcement
// reject (every publish checked).
//
//	go test -run XXX -bench PublishSchema -benchtime 4000x ./node/e2e
func BenchmarkPublishSchema(b *testing.B) {
	n := clienttest.Start(b, clienttest.Options{})
	payload := benchInvoice()
	schema := &structpb.Value{}
	if err := protojson.Unmarshal([]byte(`{"type":"object","required":["invoice","amount","currency","customer","items"],"properties":{`+
		`"invoice":{"type":"string","pattern":"^inv_"},"amount":{"type":"integer","minimum":0},"currency":{"enum":["EUR","USD"]},`+
		`"customer":{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"vip":{"type":"boolean"},"country":{"type":"string","minLength":2,"maxLength":2}}},`+
		`"items":{"type":"array","maxItems":100,"items":{"type":"object","required":["sku","qty","price"],"properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1},"price":{"type":"number"}}}},`+
		`"note":{"type":"string","maxLength":4096}}}`), schema); err != nil {
		b.Fatal(err)
	}
	tenants := map[string]*client.Client{}
	for _, name := range []string{"plain", "checked"} {
		c := n.Client(b, n.Tenant(b, name))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for i := range 4 {
			ep, err := c.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
				Url: fmt.Sprintf("http://127.0.0.1:1/%s/%d", name, i), EventTypes: []string{"invoice.paid"}}})
			if err == nil {
				_, err = c.PauseEndpoint(ctx, &controlv1.PauseEndpointRequest{EndpointId: ep.GetEndpoint().GetEndpointId()})
			}
			if err != nil {
				b.Fatalf("endpoint of %s: %v", name, err)
			}
		}
		if name == "checked" {
			_, err := c.PutEventType(ctx, &controlv1.PutEventTypeRequest{EventType: "invoice.paid", Schema: schema})
			if err == nil {
				_, err = c.UpdateTenant(ctx, &controlv1.UpdateTenantRequest{Settings: &controlv1.TenantSettings{SchemaEnforcement: "reject"},
					UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"schema_enforcement"}}})
			}
			if err != nil {
				b.Fatalf("catalog: %v", err)
			}
		}
		cancel()
		tenants[name] = c
	}
	publishPairs(b, tenants, "plain", "checked", payload)
}
