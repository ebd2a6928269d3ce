package filter_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/filter"
)

func invoice(payload string) *filter.Input {
	return filter.NewInput(filter.Event{
		Type: "invoice.paid", ID: "inv_1", Payload: []byte(payload),
		Headers:    map[string]string{"x-region": "eu"},
		OccurredAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), ContentType: "application/json",
	})
}

func TestMatch(t *testing.T) {
	body := `{"amount":4200,"currency":"EUR","items":[{"sku":"A1"},{"sku":"GIFT"}],"customer":{"vip":true}}`
	tests := []struct {
		name, expr string
		payload    string
		want       bool
		wantErr    string
	}{
		{name: "type", expr: `type == "invoice.paid"`, want: true},
		{name: "type prefix", expr: `type.startsWith("order.")`, want: false},
		{name: "number against int", expr: `data.amount > 1000`, want: true},
		{name: "number equal int", expr: `data.amount == 4200`, want: true},
		{name: "string field", expr: `data.currency == "USD"`, want: false},
		{name: "header", expr: `headers["x-region"] == "eu"`, want: true},
		{name: "header absent with in", expr: `"x-tier" in headers && headers["x-tier"] == "gold"`, want: false},
		{name: "exists", expr: `data.items.exists(i, i.sku == "GIFT")`, want: true},
		{name: "has", expr: `has(data.customer.vip) && data.customer.vip`, want: true},
		{name: "occurred_at", expr: `occurred_at > timestamp("2026-11-30T00:00:00Z")`, want: true},
		{name: "missing field fails closed", expr: `data.discount > 0`, want: false, wantErr: "no such key"},
		{name: "not JSON", expr: `data.amount > 0`, payload: "not json", want: false, wantErr: "no such key"},
		{name: "dyn not bool", expr: `data.currency`, want: false, wantErr: "not true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := filter.Compile(tt.expr)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tt.expr, err)
			}
			p := body
			if tt.payload != "" {
				p = tt.payload
			}
			got, err := f.Match(invoice(p))
			if got != tt.want {
				t.Errorf("Match = %v, want %v (err %v)", got, tt.want, err)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompileErrorsNamePosition(t *testing.T) {
	tests := []struct {
		expr       string
		line, col  int
		msgContain string
	}{
		{expr: `data.amount >`, line: 1, col: 14, msgContain: "Syntax error"},
		{expr: `dta.amount > 1`, line: 1, col: 1, msgContain: "undeclared reference to 'dta'"},
		{expr: "type == \"a\" &&\n  size(headers) > \"x\"", line: 2, col: 17, msgContain: "no matching overload"},
		{expr: `type + "x"`, line: 1, col: 1, msgContain: "must be a condition"},
		{expr: `data.items.exists(i, data.items.exists(j, i == j))`, msgContain: "over the limit"},
		{expr: strings.Repeat("a", filter.MaxLen+1), msgContain: "at most"},
		{expr: "  ", msgContain: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.expr[:min(len(tt.expr), 30)], func(t *testing.T) {
			_, err := filter.Compile(tt.expr)
			var fe *filter.Error
			if !errors.As(err, &fe) || !errors.Is(err, filter.ErrInvalid) {
				t.Fatalf("Compile(%q) = %v, want a *filter.Error", tt.expr, err)
			}
			if fe.Line != tt.line || fe.Column != tt.col {
				t.Errorf("position %d:%d, want %d:%d (%v)", fe.Line, fe.Column, tt.line, tt.col, err)
			}
			if !strings.Contains(fe.Msg, tt.msgContain) {
				t.Errorf("message %q, want it to contain %q", fe.Msg, tt.msgContain)
			}
		})
	}
}

func TestCostLimitAtEvaluation(t *testing.T) {
	// One loop passes Compile (100 entries are cheap), but an event with
	// 10,000 entries stops at the limit and does not pass.
	f, err := filter.Compile(`data.items.exists(i, i.sku == "none")`)
	if err != nil {
		t.Fatal(err)
	}
	small := `{"items":[` + strings.Repeat(`{"sku":"a"},`, 50) + `{"sku":"a"}]}`
	if ok, err := f.Match(invoice(small)); ok || err != nil {
		t.Fatalf("small event: %v, %v; want false, no error", ok, err)
	}
	big := `{"items":[` + strings.Repeat(`{"sku":"a"},`, 10_000) + `{"sku":"a"}]}`
	ok, err := f.Match(invoice(big))
	if ok || err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Fatalf("big event: %v, %v; want false, cost limit exceeded", ok, err)
	}
}

func TestExplainShowsValuesSeen(t *testing.T) {
	f, err := filter.Compile(`data.amount >= 10000 && headers["x-region"] == "eu" || type == "refund"`)
	if err != nil {
		t.Fatal(err)
	}
	ex := f.Explain(invoice(`{"amount":4200}`))
	if ex.Passed || ex.Err != "" {
		t.Fatalf("Explain = %+v, want not passed, no error", ex)
	}
	got := map[string]string{}
	for _, v := range ex.Values {
		if v.Err != "" {
			got[v.Expr] = "error: " + v.Err
			continue
		}
		b, _ := v.Value.MarshalJSON()
		got[v.Expr] = string(b)
	}
	want := map[string]string{"data.amount": "4200", "type": `"invoice.paid"`}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("value of %s = %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
	// && stopped at data.amount: the header was never read.
	if _, ok := got[`headers["x-region"]`]; ok {
		t.Errorf("the header was reported, though && stopped before it: %v", got)
	}

	ex = f.Explain(invoice(`{"total":1}`))
	if ex.Passed || !strings.Contains(ex.Err, "no such key") {
		t.Fatalf("Explain on an event without amount = %+v, want an error", ex)
	}
}

func TestCacheCompilesOncePerVersion(t *testing.T) {
	var c filter.Cache
	a, err := c.Get("ep_1", 1, `type == "a"`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Get("ep_1", 1, `type == "a"`)
	if a != b {
		t.Error("the same endpoint and version compiled twice")
	}
	d, _ := c.Get("ep_1", 2, `type == "b"`)
	if d == a || d.String() != `type == "b"` {
		t.Errorf("version 2 got %q", d)
	}
	if _, err := c.Get("ep_2", 1, `type ==`); !errors.Is(err, filter.ErrInvalid) {
		t.Errorf("a bad filter from the cache: %v", err)
	}
}

func ExampleFilter_Match() {
	f, err := filter.Compile(`data.amount >= 1000 && headers["x-region"] == "eu"`)
	if err != nil {
		fmt.Println(err)
		return
	}
	in := filter.NewInput(filter.Event{
		Type: "invoice.paid", Payload: []byte(`{"amount": 4200}`),
		Headers: map[string]string{"x-region": "eu"},
	})
	passed, err := f.Match(in)
	fmt.Println(passed, err)
	_, err = filter.Compile(`data.amount >= `)
	fmt.Println(err)
	// Output:
	// true <nil>
	// line 1, column 16: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}
}
