package tenant_test

import (
	"fmt"
	"time"

	"github.com/hookline/hookline/actors/tenant"
)

func ExampleLeases() {
	// A tenant allowed 100 attempts/s and 10 in flight, two busy endpoints.
	l := tenant.NewLeases(time.Second, 3*time.Second)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := l.Grant(now, "ep_a", 500, 50, 100, 10)
	b := l.Grant(now, "ep_b", 500, 50, 100, 10) // a holds everything until its lease ends
	now = now.Add(time.Second)
	a2 := l.Grant(now, "ep_a", 500, 50, 100, 10)
	b2 := l.Grant(now, "ep_b", 500, 50, 100, 10)
	fmt.Println(a.Attempts, a.InFlight, b.Attempts, b.InFlight)
	fmt.Println(a2.Attempts, a2.InFlight, b2.Attempts, b2.InFlight)
	// Output:
	// 100 10 0 0
	// 50 5 50 5
}
