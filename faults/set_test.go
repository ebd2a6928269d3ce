package faults_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hookline/hookline/faults"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       *faults.Set
	}{
		{"empty", "", &faults.Set{}},
		{"all", "slow-append=20ms,unknown-every=50,kill-in-plan=3,kill-after-2xx=7,plan-short=1000,corrupt-body=500,skew-sequence=4,duplicate-due,duplicate-wakes,drop-wakes=ep_,hide=AttemptSucceeded:2,lag-projections=2s",
			&faults.Set{SlowAppend: 20 * time.Millisecond, UnknownEvery: 50, KillInPlan: 3, KillAfter2xx: 7, PlanShort: 1000, CorruptBody: 500, SkewSequence: 4, DuplicateDue: true,
				DuplicateWakes: true, DropWakes: "ep_", HideType: "AttemptSucceeded", HideNth: 2, LagProjections: 2 * time.Second}},
		{"spaces", " duplicate-due , slow-append=1s ", &faults.Set{DuplicateDue: true, SlowAppend: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := faults.Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tc.want.String() {
				t.Errorf("Parse(%q) = %q, want %q", tc.spec, s.String(), tc.want.String())
			}
			if s.Active() != (tc.spec != "") {
				t.Errorf("Active() = %v for %q", s.Active(), tc.spec)
			}
			back, err := faults.Parse(s.String())
			if err != nil || back.String() != s.String() {
				t.Errorf("round trip of %q: %q, %v", s.String(), back.String(), err)
			}
		})
	}
	for _, bad := range []string{"nope", "slow-append=fast", "slow-append=0s", "unknown-every=0", "kill-in-plan=x", "plan-short=0", "corrupt-body=", "skew-sequence=0", "hide=AttemptSucceeded", "hide=:1", "drop-wakes=", "lag-projections=0s", "lag-projections=soon"} {
		if _, err := faults.Parse(bad); !errors.Is(err, faults.ErrBadSpec) {
			t.Errorf("Parse(%q) = %v, want ErrBadSpec", bad, err)
		}
	}
	var none *faults.Set
	if none.Active() || none.String() != "" {
		t.Error("a nil Set injects something")
	}
}
