package filter

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseJSON holds parseJSON to encoding/json: the same value where it
// decodes, an error where it fails.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		`{"amount":4200,"currency":"EUR","items":[{"sku":"A"},{"sku":"B"}],"ok":true,"none":null}`,
		`[1, -0.5e3, 1E+2, 0, -0]`, `"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`,
		"\"\xff\xfe\"", `{"a":1,"a":2}`, `  {} `, `[]`, `01`, `1.`, `.5`, `-`, `1e`, `1e400`, `[1,]`, `{"a":1,}`, `{"a" 1}`,
		`tru`, `nulls`, "\"\x01\"", `"\x"`, `{"a":[{"b":[{"c":{}}]}]}`, `"` + "\u2028" + `"`, `1 2`, ``, ` `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want any
		werr := json.Unmarshal(b, &want)
		got, gerr := parseJSON(b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json says %v, parseJSON %v", b, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: encoding/json gives %#v, parseJSON %#v", b, want, got)
		}
	})
}

// BenchmarkParseJSON compares parseJSON with encoding/json on a 1.5 KB
// event payload.
func BenchmarkParseJSON(b *testing.B) {
	payload := []byte(`{"invoice":"inv_1001","amount":4200,"currency":"EUR","customer":{"id":"cus_9","vip":true,"country":"DE"},"items":[` +
		strings.TrimSuffix(strings.Repeat(`{"sku":"SKU-1","qty":1,"price":100},`, 20), ",") + `],"note":"` + strings.Repeat("x", 600) + `"}`)
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := json.Unmarshal(payload, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parseJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseJSON(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
