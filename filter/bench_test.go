package filter_test

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/filter"
)

// BenchmarkMatch measures one filter's cost per planned delivery: the
// evaluation on an Input shared by every endpoint of the publish (its
// payload parsed once, counted in BenchmarkInput).
func BenchmarkMatch(b *testing.B) {
	payload := []byte(`{"invoice":"inv_1001","amount":4200,"currency":"EUR","customer":{"id":"cus_9","vip":true,"country":"DE"},` +
		`"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"SKU-1","qty":1,"price":100},`, 20), ",") + `],"note":"` + strings.Repeat("x", 600) + `"}`)
	exprs := map[string]string{
		"simple": `type == "invoice.paid"`,
		"field":  `data.amount >= 1000 && data.currency == "EUR"`,
		"heavy": `type.startsWith("invoice.") && headers["x-region"] in ["eu", "us"] && data.customer.country in ["DE", "FR", "NL"] && ` +
			`data.items.exists(i, i.sku.startsWith("SKU-") && i.qty * i.price > 50) && data.note.contains("xyz") == false && size(data.items) <= 50`,
	}
	for _, name := range []string{"simple", "field", "heavy"} {
		f, err := filter.Compile(exprs[name])
		if err != nil {
			b.Fatal(err)
		}
		in := filter.NewInput(filter.Event{Type: "invoice.paid", Payload: payload, Headers: map[string]string{"x-region": "eu"}})
		in.Data()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := f.Match(in); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

// BenchmarkInput measures the once-per-publish part: parsing a 1.5 KB
// JSON payload for the filters that read data.
func BenchmarkInput(b *testing.B) {
	payload := []byte(`{"invoice":"inv_1001","amount":4200,"currency":"EUR","customer":{"id":"cus_9","vip":true,"country":"DE"},` +
		`"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"SKU-1","qty":1,"price":100},`, 20), ",") + `],"note":"` + strings.Repeat("x", 600) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		filter.NewInput(filter.Event{Type: "invoice.paid", Payload: payload}).Data()
	}
}

// BenchmarkPublishRoute measures what one publish pays for filters on
// every one of its four endpoints: the payload parsed once and four
// filters (those of BenchmarkPublishFilters in node/e2e).
func BenchmarkPublishRoute(b *testing.B) {
	payload := []byte(`{"invoice":"inv_1001","amount":4200,"currency":"EUR","customer":{"id":"cus_9","vip":true,"country":"DE"},` +
		`"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"SKU-1","qty":1,"price":100},`, 20), ",") + `],"note":"` + strings.Repeat("x", 600) + `"}`)
	var fs []*filter.Filter
	for _, src := range []string{
		`data.amount >= 1000 && data.currency == "EUR"`,
		`headers["x-region"] == "eu" && data.customer.country in ["DE", "FR"]`,
		`data.items.exists(i, i.sku.startsWith("SKU-"))`,
		`type == "invoice.paid" && has(data.customer.vip)`,
	} {
		f, err := filter.Compile(src)
		if err != nil {
			b.Fatal(err)
		}
		fs = append(fs, f)
	}
	b.ReportAllocs()
	for b.Loop() {
		in := filter.NewInput(filter.Event{Type: "invoice.paid", Payload: payload, Headers: map[string]string{"x-region": "eu"}})
		for _, f := range fs {
			if ok, err := f.Match(in); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	}
}
