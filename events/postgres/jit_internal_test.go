package postgres

import (
	"context"
	"maps"
	"testing"
)

// TestSessionsWithoutJIT checks that the log's sessions do not JIT-compile
// their queries: a subscriber's page, planned generically, costs far more
// than jit_above_cost by its estimate and compiled itself on every read
// (180-270 ms each) to run for about one.
func TestSessionsWithoutJIT(t *testing.T) {
	l, _ := openFresh(t)
	var jit string
	if err := l.pool.QueryRow(context.Background(), "SHOW jit").Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if jit != "off" {
		t.Errorf("jit = %q in the log's sessions, want off", jit)
	}
}

// TestWithoutJITKeepsTheDSNs leaves a DSN's own choice alone.
func TestWithoutJITKeepsTheDSNs(t *testing.T) {
	for _, params := range []map[string]string{{"jit": "on"}, {"options": "-c jit=on"}} {
		want := maps.Clone(params)
		withoutJIT(params)
		if !maps.Equal(params, want) {
			t.Errorf("withoutJIT changed %v to %v", want, params)
		}
	}
	params := map[string]string{"application_name": "x"}
	withoutJIT(params)
	if params["jit"] != "off" {
		t.Errorf("withoutJIT(%v) left jit %q, want off", params, params["jit"])
	}
}
