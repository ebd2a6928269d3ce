package main_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testpki"
)

// TestReceiveMutualTLSAndOAuth2: `hookline receive --tls-cert --tls-key
// --client-ca` serves HTTPS and takes only senders presenting a client
// certificate its CA signed, and names it; `--oauth2-client ID:SECRET`
// issues bearer tokens at /token to that client alone and answers 401 to
// a webhook without one of them.
func TestReceiveMutualTLSAndOAuth2(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	ca := testpki.NewCA(t, "receiver-ca")
	write := func(name, pem string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvCert, srvKey := ca.ServerPEM(t)
	cliCert, cliKey := ca.Client(t, "hookline", time.Now().Add(time.Hour))
	pair, err := tls.X509KeyPair([]byte(cliCert), []byte(cliKey))
	if err != nil {
		t.Fatal(err)
	}
	p := startReceive(t, nil, "--tls-cert", write("srv.pem", srvCert), "--tls-key", write("srv-key.pem", srvKey),
		"--client-ca", write("ca.pem", ca.PEM), "--oauth2-client", "hookline:s3cret")
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("listening on %s, want https", p.url)
	}
	withCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}}}}
	without := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	if res, err := without.Post(p.url+"/in", "application/json", strings.NewReader(`{}`)); err == nil {
		res.Body.Close()
		t.Fatalf("a sender without a client certificate got %s", res.Status)
	}
	token := func(id, secret string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, p.url+"/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id, secret)
		res, err := withCert.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var tr struct {
			AccessToken string `json:"access_token"`
			TokenType   string `json:"token_type"`
		}
		_ = json.NewDecoder(res.Body).Decode(&tr)
		return res.StatusCode, tr.AccessToken
	}
	if code, _ := token("hookline", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("a token for a wrong secret: %d, want 401", code)
	}
	code, tok := token("hookline", "s3cret")
	if code != http.StatusOK || tok == "" {
		t.Fatalf("a token for the client: %d %q", code, tok)
	}
	hook := func(bearer string) int {
		req, _ := http.NewRequest(http.MethodPost, p.url+"/in", strings.NewReader(`{"a":1}`))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := withCert.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := hook(""); code != http.StatusUnauthorized {
		t.Errorf("a webhook without a token: %d, want 401", code)
	}
	if line := p.next(t); !strings.Contains(line, `client certificate "hookline"`) || !strings.Contains(line, "-> 401") {
		t.Errorf("its line: %s", line)
	}
	if code := hook(tok); code != http.StatusOK {
		t.Errorf("a webhook with the token: %d, want 200", code)
	}
	if line := p.next(t); !strings.Contains(line, "bearer token ok") || !strings.Contains(line, "-> 200") {
		t.Errorf("its line: %s", line)
	}
}
