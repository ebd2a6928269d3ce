package eventtype_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hookline/hookline/eventtype"
)

func TestCheckEntry(t *testing.T) {
	tests := []struct {
		entry string
		want  string // a part of the error; "" for none
	}{
		{entry: "order.paid"},
		{entry: "order.*"},
		{entry: "order.item.*"},
		{entry: "*"},
		{entry: "hookline.*"},
		{entry: "a_b-c.D9"},
		{entry: "order*", want: `has '*' at offset 5`},
		{entry: "*.paid", want: `has '*' at offset 0`},
		{entry: "order.*.added", want: `has '*' at offset 6`},
		{entry: "order.**", want: `has '*' at offset 6`},
		{entry: "**", want: `has '*' at offset 0`},
		{entry: ".*", want: "has no prefix"},
		{entry: "order..*", want: "empty segment"},
		{entry: "order.>", want: `has '>'`},
		{entry: "order.#", want: `has '#'`},
		{entry: "", want: "is empty"},
		{entry: strings.Repeat("a", 127) + ".*", want: "characters long"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			err := eventtype.CheckEntry(tt.entry)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckEntry(%q) = %v, want nil", tt.entry, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("CheckEntry(%q) = %v, want an error with %q", tt.entry, err, tt.want)
			}
		})
	}
}

func TestCheckRefusesPatterns(t *testing.T) {
	for _, typ := range []string{"order.*", "*", "order*", "a.*.b"} {
		if err := eventtype.Check(typ); err == nil || !strings.Contains(err.Error(), "is a pattern") {
			t.Errorf("Check(%q) = %v, want an error saying it is a pattern", typ, err)
		}
	}
	for _, typ := range []string{"order.paid", "a", "hookline.endpoint.paused"} {
		if err := eventtype.Check(typ); err != nil {
			t.Errorf("Check(%q) = %v", typ, err)
		}
	}
	if err := eventtype.Check("a..b"); err == nil || !strings.Contains(err.Error(), "empty segment") {
		t.Errorf(`Check("a..b") = %v`, err)
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name  string
		types []string
		typ   string
		want  string // the entry; "" for no match
	}{
		{name: "exact", types: []string{"order.paid"}, typ: "order.paid", want: "order.paid"},
		{name: "exact only", types: []string{"order.paid"}, typ: "order.paid.late", want: ""},
		{name: "prefix, one level", types: []string{"order.*"}, typ: "order.paid", want: "order.*"},
		{name: "prefix, any depth", types: []string{"order.*"}, typ: "order.item.added", want: "order.*"},
		{name: "prefix needs the dot", types: []string{"order.*"}, typ: "order", want: ""},
		{name: "prefix is whole segments", types: []string{"order.*"}, typ: "orders.paid", want: ""},
		{name: "deeper prefix", types: []string{"order.item.*"}, typ: "order.paid", want: ""},
		{name: "the most specific wins", types: []string{"*", "order.*", "order.item.*"}, typ: "order.item.added", want: "order.item.*"},
		{name: "exact beats a pattern", types: []string{"order.*", "order.paid"}, typ: "order.paid", want: "order.paid"},
		{name: "all", types: []string{"*"}, typ: "invoice.paid", want: "*"},
		{name: "none is all", types: nil, typ: "invoice.paid", want: "*"},
		{name: "all is not operational", types: []string{"*"}, typ: "hookline.endpoint.paused", want: ""},
		{name: "hookline.* is", types: []string{"hookline.*"}, typ: "hookline.endpoint.paused", want: "hookline.*"},
		{name: "an operational type named", types: []string{"hookline.endpoint.paused"}, typ: "hookline.endpoint.paused", want: "hookline.endpoint.paused"},
		{name: "case counts", types: []string{"Order.*"}, typ: "order.paid", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := eventtype.Match(tt.types, tt.typ)
			if got != tt.want || ok != (tt.want != "") {
				t.Fatalf("Match(%q, %q) = %q, %v; want %q", tt.types, tt.typ, got, ok, tt.want)
			}
		})
	}
}

func TestPatternsAreEntries(t *testing.T) {
	// Every pattern Patterns returns is itself a valid entry, so the
	// registry's index keys are what endpoints can subscribe with.
	for _, typ := range []string{"a", "order.paid", "order.item.added", "a-b.c_d.e.f.g"} {
		for _, p := range eventtype.Patterns(typ) {
			if err := eventtype.CheckEntry(p); err != nil {
				t.Errorf("Patterns(%q) has %q: %v", typ, p, err)
			}
		}
	}
}

func TestEntries(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{nil, []string{"*"}},
		{[]string{"b", "a.*", "b"}, []string{"a.*", "b"}},
		{[]string{"a", "*"}, []string{"*"}},
	} {
		if got := eventtype.Entries(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Entries(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func ExamplePatterns() {
	fmt.Println(eventtype.Patterns("order.item.added"))
	fmt.Println(eventtype.Patterns("hookline.endpoint.paused"))
	// Output:
	// [order.item.added order.item.* order.* *]
	// [hookline.endpoint.paused hookline.endpoint.* hookline.*]
}

func ExampleMatch() {
	fmt.Println(eventtype.Match([]string{"invoice.paid", "order.*"}, "order.item.added"))
	fmt.Println(eventtype.Match([]string{"invoice.paid", "order.*"}, "order"))
	// Output:
	// order.* true
	//  false
}
