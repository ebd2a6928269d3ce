package schema_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hookline/hookline/schema"
)

// benchPayload is an order of about 1.5 KB, the size the throughput
// benchmarks publish, that matches orderSchema.
func benchPayload() []byte {
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"sku":"sku-%04d-%s","qty":%d}`, i, strings.Repeat("x", 30), i+1))
	}
	return []byte(`{"order":"ord_7f3a","total":1234.5,"items":[` + strings.Join(items, ",") + `]}`)
}

// BenchmarkValidate is the cost a publish pays for its payload's check
// against a compiled schema (schema_enforcement warn or reject).
func BenchmarkValidate(b *testing.B) {
	s, err := schema.Compile([]byte(orderSchema))
	if err != nil {
		b.Fatal(err)
	}
	p := benchPayload()
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if v := s.Validate(p); v != nil {
			b.Fatal(v)
		}
	}
}

// BenchmarkCompile is the cost paid once per schema version on each node.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schema.Compile([]byte(orderSchema)); err != nil {
			b.Fatal(err)
		}
	}
}
