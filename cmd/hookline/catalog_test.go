package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/client/clienttest"
)

// TestEventTypeCommands: event-types put reads a schema from a file and
// prints the new version; event-types list shows it and the enforcement;
// tenants update --schema-enforcement reject makes a publish that breaks
// the schema fail with the field named, and an unknown mode is refused.
func TestEventTypeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	n := clienttest.Start(t, clienttest.Options{})
	tenant := []string{"--addr", n.Addr, "--token", n.Tenant(t, "acme")}
	run := func(args ...string) (string, error) {
		t.Helper()
		out, errOut, err := hookline(t, append(args, tenant...)...)
		return out + errOut, err
	}
	schema := filepath.Join(t.TempDir(), "paid.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","required":["total"],"properties":{"total":{"type":"number","minimum":0}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run("event-types", "put", "--type", "order.paid", "--description", "An order was paid.", "--schema", "@"+schema, "--example", `{"total":5}`)
	if err != nil || !strings.Contains(out, "order.paid") || !strings.Contains(out, "version 1") {
		t.Fatalf("event-types put: %v\n%s", err, out)
	}
	if out, err := run("event-types", "list"); err != nil || !strings.Contains(out, "schema enforcement: off") || !strings.Contains(out, `"minimum":0`) {
		t.Fatalf("event-types list: %v\n%s", err, out)
	}
	if out, err := run("event-types", "export"); err != nil || !strings.Contains(out, `"openapi": "3.1.0"`) || !strings.Contains(out, `"order.paid"`) {
		t.Fatalf("event-types export: %v\n%s", err, out)
	}
	if out, err := run("tenants", "update", "--schema-enforcement", "strict"); err == nil || !strings.Contains(out, "off, warn or reject") {
		t.Fatalf("an unknown mode: %v\n%s", err, out)
	}
	if out, err := run("tenants", "update", "--schema-enforcement", "reject"); err != nil || !strings.Contains(out, "reject (schema enforcement)") {
		t.Fatalf("tenants update: %v\n%s", err, out)
	}
	if out, err := run("tenants", "update", "--retention", "168h"); err != nil || !strings.Contains(out, "168h0m0s (its own retention)") {
		t.Fatalf("tenants update --retention: %v\n%s", err, out)
	}
	if out, err := run("events", "publish", "--id", "e1", "--type", "order.paid", "--data", `{"total":-1}`); err == nil || !strings.Contains(out, "/total") {
		t.Fatalf("a publish that breaks the schema: %v\n%s", err, out)
	}
	if out, err := run("events", "publish", "--id", "e2", "--type", "order.paid", "--data", `{"total":1}`); err != nil {
		t.Fatalf("a publish that matches: %v\n%s", err, out)
	}
}
