package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the writer (dev) and the reader
// (the test) at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDevPrintsConsoleAndPortalLink runs `hookline dev` until it has
// printed the console's address, the dev tenant's portal link and its
// endpoint, and opens them: the console page, a session with the link's
// token, and the endpoint by the id printed.
func TestDevPrintsConsoleAndPortalLink(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- dev(ctx, []string{"--data", t.TempDir()}, &out, io.Discard) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	link := regexp.MustCompile(`portal link  (http://\S+)/console/portal#token=(hlp_\S+)`)
	endpoint := regexp.MustCompile(`endpoint (\S+) -> http://`)
	var m, e []string
	for deadline := time.Now().Add(30 * time.Second); m == nil || e == nil; {
		if m, e = link.FindStringSubmatch(out.String()), endpoint.FindStringSubmatch(out.String()); m != nil && e != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no portal link or endpoint within 30 s; printed:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	base, token := m[1], m[2]
	if !strings.Contains(out.String(), "console      "+base+"/console/") {
		t.Errorf("the console's address is not printed:\n%s", out.String())
	}
	res, err := http.Get(base + "/console/portal")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET the portal: %v %v", res, err)
	}
	res.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var s struct {
		Kind     string `json:"kind"`
		TenantID string `json:"tenant_id"`
	}
	if err := json.Unmarshal(body, &s); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("session: %s %v", res.Status, err)
	}
	if s.Kind != "portal_token" || s.TenantID != "dev" {
		t.Errorf("the portal link opens %s, want a portal token of dev", body)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/v1/webhook-endpoints/"+e[1], nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET the endpoint dev printed, %s: %s", e[1], res.Status)
	}
}
