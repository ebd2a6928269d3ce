package filter_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookline/hookline/filter"
)

// FuzzInput evaluates filters on arbitrary payloads: nothing panics (deep
// nesting, huge numbers, invalid UTF-8, not JSON at all), and a filter
// on data passes exactly when the payload, decoded apart with
// encoding/json, holds what it asks for.
func FuzzInput(f *testing.F) {
	for _, s := range []string{
		`{"amount":4200,"currency":"EUR","items":[{"sku":"A"},{"sku":"B"}],"ok":true,"none":null}`,
		`[1, -0.5e3, 1E+2, 0, -0]`, `"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`,
		"\"\xff\xfe\"", `{"a":1,"a":2}`, `{"amount":1,"amount":2000}`, `{"amount":"2000"}`, `{"amount":1000}`, `{"amount":999.99}`, `  {} `, `[]`, `01`, `1.`, `.5`, `-`, `1e`, `1e400`,
		`[1,]`, `{"a":1,}`, `{"a" 1}`, `tru`, `nulls`, "\"\x01\"", `"\x"`, `{"a":[{"b":[{"c":{}}]}]}`, `"` + "\u2028" + `"`, `1 2`, ``, ` `,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		f.Add([]byte(s))
	}
	amount, err := filter.Compile(`has(data.amount) && data.amount >= 1000`)
	if err != nil {
		f.Fatal(err)
	}
	others := make([]*filter.Filter, 0, 3)
	for _, src := range []string{`data.items.exists(i, i.sku == "B")`, `size(data) > 1`, `data == null`} {
		g, err := filter.Compile(src)
		if err != nil {
			f.Fatal(err)
		}
		others = append(others, g)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		in := filter.NewInput(filter.Event{Type: "invoice.paid", Payload: payload})
		var v any
		_ = json.Unmarshal(payload, &v)
		obj, _ := v.(map[string]any)
		n, isNumber := obj["amount"].(float64)
		want := isNumber && n >= 1000
		if got, err := amount.Match(in); got != want {
			t.Fatalf("%q: %s gave %v (%v), want %v", payload, amount, got, err, want)
		}
		for _, g := range append(others, amount) {
			g.Match(in)
			g.Explain(in)
		}
	})
}
