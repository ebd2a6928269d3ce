package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/faults"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestShortPlan: plan-short=N leaves every Nth planned delivery out,
// counted across publishes; without it the plan is kept whole.
func TestShortPlan(t *testing.T) {
	plan := func(n int) []*hooklinev1.PlannedDelivery {
		var out []*hooklinev1.PlannedDelivery
		for i := range n {
			out = append(out, &hooklinev1.PlannedDelivery{DeliveryId: fmt.Sprint("d", i)})
		}
		return out
	}
	s := &faults.Set{PlanShort: 3}
	var kept []string
	for range 2 { // two publishes of four deliveries: the 3rd and 6th go
		for _, d := range s.ShortPlan(plan(4)) {
			kept = append(kept, d.GetDeliveryId())
		}
	}
	if got, want := fmt.Sprint(kept), "[d0 d1 d3 d0 d2 d3]"; got != want {
		t.Errorf("kept %s, want %s", got, want)
	}
	var none *faults.Set
	if got := none.ShortPlan(plan(5)); len(got) != 5 {
		t.Errorf("a nil Set kept %d of 5", len(got))
	}
	if got := (&faults.Set{}).ShortPlan(plan(5)); len(got) != 5 {
		t.Errorf("no plan-short kept %d of 5", len(got))
	}
}

// attempter records the bodies and sequences it is asked to send and
// answers 200.
type attempter struct {
	bodies    [][]byte
	sequences []int64
}

func (a *attempter) Do(_ context.Context, req attempt.Request) attempt.Outcome {
	a.bodies, a.sequences = append(a.bodies, req.Payload), append(a.sequences, req.Sequence)
	return attempt.Outcome{Status: 200}
}

// TestSkewSequence: skew-sequence=N sends every Nth attempt of an ordered
// delivery with a sequence one higher; unordered attempts (sequence 0)
// neither count nor change.
func TestSkewSequence(t *testing.T) {
	inner := &attempter{}
	a := (&faults.Set{SkewSequence: 2}).Attempter(inner)
	for _, seq := range []int64{1, 0, 2, 3, 0, 4} {
		a.Do(context.Background(), attempt.Request{Sequence: seq})
	}
	if got, want := fmt.Sprint(inner.sequences), "[1 0 3 3 0 5]"; got != want {
		t.Errorf("sequences sent %s, want %s", got, want)
	}
}

// TestCorruptBody: corrupt-body=N changes one byte of every Nth attempt's
// body, on a copy: the stored payload is left alone.
func TestCorruptBody(t *testing.T) {
	inner := &attempter{}
	a := (&faults.Set{CorruptBody: 2}).Attempter(inner)
	stored := []byte(`{"order":1001}`)
	for range 4 {
		a.Do(context.Background(), attempt.Request{Payload: stored})
	}
	for i, b := range inner.bodies {
		changed := !bytes.Equal(b, stored)
		if changed != (i%2 == 1) {
			t.Errorf("attempt %d: body %q changed=%v", i+1, b, changed)
		}
		if changed && len(b) != len(stored) {
			t.Errorf("attempt %d: %d bytes, want %d", i+1, len(b), len(stored))
		}
	}
	if string(stored) != `{"order":1001}` {
		t.Errorf("the stored payload changed: %q", stored)
	}
	if (&faults.Set{}).Attempter(inner) != faults.Attempter(inner) {
		t.Error("a Set without attempter faults wrapped the attempter")
	}
}
