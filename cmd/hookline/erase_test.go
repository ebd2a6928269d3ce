package main_test

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/client/clienttest"
)

// TestEraseCommands: events get prints a payload; tenants erase refuses a
// confirmation that does not repeat the id, then erases; events get then
// says the payload was erased.
func TestEraseCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	n := clienttest.Start(t, clienttest.Options{})
	tenant := []string{"--addr", n.Addr, "--token", n.Tenant(t, "acme")}
	admin := []string{"--addr", n.Addr, "--token", clienttest.AdminToken}
	run := func(as []string, args ...string) (string, error) {
		t.Helper()
		out, errOut, err := hookline(t, append(args, as...)...)
		return out + errOut, err
	}
	if out, err := run(tenant, "events", "publish", "--id", "evt_1", "--type", "order.paid", "--data", `{"email":"someone@example.com"}`); err != nil {
		t.Fatalf("events publish: %v\n%s", err, out)
	}
	if out, err := run(tenant, "events", "get", "--id", "evt_1"); err != nil || !strings.Contains(out, "someone@example.com") || !strings.Contains(out, "sealed true") {
		t.Fatalf("events get: %v\n%s", err, out)
	}
	if out, err := run(admin, "tenants", "erase", "--id", "acme", "--confirm", "acm"); err == nil || !strings.Contains(out, "--confirm") {
		t.Fatalf("tenants erase with a wrong confirmation: %v\n%s", err, out)
	}
	if out, err := run(admin, "tenants", "erase", "--id", "acme", "--confirm", "acme"); err != nil || !strings.Contains(out, "data key destroyed: dk_") {
		t.Fatalf("tenants erase: %v\n%s", err, out)
	}
	if out, err := run(tenant, "events", "get", "--id", "evt_1"); err == nil || !strings.Contains(out, "erased") || strings.Contains(out, "someone@example.com") {
		t.Fatalf("events get after erasure: %v\n%s", err, out)
	}
}
