package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/internal/testpki"
)

// TestEndpointHeaderFlags: --header and --secret-header set an endpoint's
// static headers, the secret one shown by name only; --clear-headers
// removes both; the --oauth2-* flags set a grant, its secret never
// printed; a header Hookline sets is refused with the field named.
func TestEndpointHeaderFlags(t *testing.T) {
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
	out, err := run("endpoints", "create", "--id", "ep_h", "--url", "http://127.0.0.1:9/in", "--types", "invoice.paid",
		"--header", "X-Region: eu", "--secret-header", "Authorization: Bearer cli-s3cret", "--header-prefix", "svix-")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	for _, want := range []string{"header       X-Region: eu", "header       Authorization: (secret, sealed)", "headers as   svix-id, svix-signature"} {
		if !strings.Contains(out, want) {
			t.Errorf("create printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cli-s3cret") {
		t.Errorf("create printed the secret header's value:\n%s", out)
	}
	id := regexp.MustCompile(`ep_h_[a-z0-9]+`).FindString(out)
	out, err = run("endpoints", "update", "--id", id, "--clear-headers")
	if err != nil || strings.Contains(out, "header       ") {
		t.Errorf("update --clear-headers: %v\n%s", err, out)
	}
	out, err = run("endpoints", "update", "--id", id, "--oauth2-token-url", "https://auth.example.com/token",
		"--oauth2-client-id", "hookline", "--oauth2-client-secret", "cli-cs-1", "--oauth2-scopes", "a,b")
	if err != nil || !strings.Contains(out, `oauth2       https://auth.example.com/token, client hookline, scopes "a b" (client secret sealed)`) || strings.Contains(out, "cli-cs-1") {
		t.Errorf("update with an OAuth2 grant: %v\n%s", err, out)
	}
	ca := testpki.NewCA(t, "ca")
	cert, key := ca.Client(t, "cli-client", time.Now().Add(time.Hour))
	dir := t.TempDir()
	for name, pemText := range map[string]string{"c.pem": cert, "k.pem": key, "ca.pem": ca.PEM} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pemText), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err = run("endpoints", "update", "--id", id, "--mtls-cert", filepath.Join(dir, "c.pem"), "--mtls-key", filepath.Join(dir, "k.pem"), "--mtls-ca", filepath.Join(dir, "ca.pem"))
	if err != nil || !strings.Contains(out, `mtls         client certificate "cli-client"`) || strings.Contains(out, "PRIVATE KEY") || !strings.Contains(out, "oauth2 ") {
		t.Errorf("update with a client certificate (the grant kept beside it): %v\n%s", err, out)
	}
	out, err = run("endpoints", "update", "--id", id, "--header", "Svix-Id: forged")
	if err == nil || !strings.Contains(out, "settings.headers") {
		t.Errorf("update with a header named like the svix- signature headers: %v\n%s; want a refusal naming settings.headers", err, out)
	}
}
