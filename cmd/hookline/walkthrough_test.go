package main_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/verify"
)

// TestWalkThrough follows the README's walk-through with the binary: the
// lists say when they are empty, --quiet prints the API key or the secret
// alone (for $(…)), and `hookline receive` verifies what the node delivers
// with the secret that `endpoints create --quiet` printed.
func TestWalkThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	n := clienttest.Start(t, clienttest.Options{})
	run := func(token string, args ...string) string {
		t.Helper()
		out, errOut, err := hookline(t, append(args, "--addr", n.Addr, "--token", token)...)
		if err != nil {
			t.Fatalf("hookline %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	// secretLine checks that out is one line, a secret with prefix.
	secretLine := func(t *testing.T, out, prefix string) string {
		t.Helper()
		if !regexp.MustCompile(`^` + prefix + `\S+\n$`).MatchString(out) {
			t.Fatalf("--quiet printed %q, want a %s… line alone", out, prefix)
		}
		return strings.TrimSpace(out)
	}
	run(clienttest.AdminToken, "tenants", "create", "--id", "acme", "--name", "Acme")

	t.Run("a tenant without keys", func(t *testing.T) {
		if out := run(clienttest.AdminToken, "tenants", "get", "--id", "acme"); !strings.Contains(out, "keys     none") {
			t.Errorf("tenants get:\n%s", out)
		}
	})
	var key string
	t.Run("keys issue --quiet", func(t *testing.T) {
		key = secretLine(t, run(clienttest.AdminToken, "keys", "issue", "--tenant", "acme", "--name", "billing", "--quiet"), "hk_")
	})
	t.Run("empty lists", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"endpoints", "list"}, "no endpoints\n"},
			{[]string{"deliveries", "list"}, "no deliveries\n"},
			{[]string{"deliveries", "list", "--status", "failed", "--type", "invoice.paid"}, "no deliveries with status failed, type invoice.paid\n"},
		} {
			if out := run(key, tc.args...); out != tc.want {
				t.Errorf("hookline %s printed %q, want %q", strings.Join(tc.args, " "), out, tc.want)
			}
		}
	})

	// The endpoint is created before the receiver listens (its URL is
	// given after), as a walk-through does with a fixed port.
	var secret string
	t.Run("endpoints create and rotate-secret --quiet", func(t *testing.T) {
		first := secretLine(t, run(key, "endpoints", "create", "--id", "ep_walk", "--url", "http://127.0.0.1:9/in", "--types", "invoice.paid", "--quiet"), "whsec_")
		if _, err := verify.New(first); err != nil {
			t.Fatalf("endpoints create --quiet printed no secret: %v", err)
		}
		secret = secretLine(t, run(key, "endpoints", "rotate-secret", "--id", endpointID(t, run(key, "endpoints", "list")), "-q"), "whsec_")
		if secret == first {
			t.Error("rotate-secret --quiet printed the previous secret")
		}
		_, errOut, err := hookline(t, "endpoints", "create", "--url", "http://127.0.0.1:9/in", "--types", "invoice.paid", "--quiet", "--json", "--addr", n.Addr, "--token", key)
		if err == nil || !strings.Contains(errOut, "give one of them") {
			t.Errorf("--quiet with --json: %v\n%s", err, errOut)
		}
	})
	t.Run("receive verifies a delivery", func(t *testing.T) {
		p := startReceive(t, nil, "--secret", secret)
		run(key, "endpoints", "update", "--id", endpointID(t, run(key, "endpoints", "list")), "--url", p.url+"/in")
		run(key, "events", "publish", "--id", "inv_1001", "--type", "invoice.paid", "--data", `{"invoice":"1001","amount":4200}`)
		if line := p.next(t); !strings.Contains(line, "invoice.paid  inv_1001  signature ok -> 200") {
			t.Errorf("hookline receive printed %q, want the delivery verified", line)
		}
	})
}

// endpointID is the only endpoint id of an `endpoints list`.
func endpointID(t *testing.T, list string) string {
	t.Helper()
	fields := strings.Fields(list)
	if len(fields) == 0 || strings.Count(list, "\n") != 1 {
		t.Fatalf("endpoints list shows no single endpoint:\n%s", list)
	}
	return fields[0]
}
