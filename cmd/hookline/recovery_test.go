package main_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/hookline/hookline/client/clienttest"
)

// TestRecoveryCommands: `endpoints recovery` without --recovery lists the
// endpoint's recoveries, a line each; with --recovery it shows one.
func TestRecoveryCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer rcv.Close()
	n := clienttest.Start(t, clienttest.Options{})
	tenant := []string{"--addr", n.Addr, "--token", n.Tenant(t, "acme")}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := hookline(t, append(args, tenant...)...)
		if err != nil {
			t.Fatalf("hookline %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	created := regexp.MustCompile(`ep_1_[a-z0-9]+`).FindString(run("endpoints", "create", "--id", "ep_1", "--url", rcv.URL+"/in", "--types", "invoice.paid"))
	if created == "" {
		t.Fatal("endpoints create printed no endpoint id")
	}
	if out := run("endpoints", "recovery", "--id", created); !strings.Contains(out, "no recoveries") {
		t.Fatalf("endpoints recovery before any: %s", out)
	}
	var ids []string
	for range 2 {
		out := run("endpoints", "recover", "--id", created, "--since", "1h", "--status", "succeeded")
		m := regexp.MustCompile(`(?m)^recovery\s+(\S+) \(`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("endpoints recover: no recovery id in\n%s", out)
		}
		ids = append(ids, m[1])
	}
	out := run("endpoints", "recovery", "--id", created)
	for _, id := range ids {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + `\s+(running|done)\s+\S+ \.\. \S+\s+\d+ of \d+$`).MatchString(out) {
			t.Errorf("endpoints recovery: no line for %s in\n%s", id, out)
		}
	}
	if out := run("endpoints", "recovery", "--id", created, "--recovery", ids[0]); !strings.Contains(out, "recovery   "+ids[0]) {
		t.Errorf("endpoints recovery --recovery %s:\n%s", ids[0], out)
	}
}
