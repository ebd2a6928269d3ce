package attempt_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/verify"
)

func TestDoStaticHeadersAndPrefix(t *testing.T) {
	got := make(chan http.Header, 1)
	rcv := newReceiver(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}), false)
	c := devClient(t, rcv, attempt.ClientConfig{})
	req := testRequest(rcv.URL)
	req.Headers = map[string]string{"X-Api-Key": "k-123", "X-Region": "eu"}
	req.HeaderPrefix = "svix-"
	req.OrderingKey, req.Sequence = "order-7", 2
	if o := c.Do(context.Background(), req); o.Status != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", o.Status, o.Error)
	}
	h := <-got
	for name, want := range map[string]string{
		"X-Api-Key": "k-123", "X-Region": "eu",
		"Svix-Id": "dlv_01HZX", "Svix-Event-Type": "invoice.paid", "Svix-Event-Id": "evt_42",
		"Svix-Key-Version": "3", "Svix-Ordering-Key": "order-7", "Svix-Sequence": "2",
		"Webhook-Id": "", "Webhook-Signature": "",
	} {
		if v := h.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	// The signature is the same scheme under other names.
	v := verify.Verifier{Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(testSecret.Key)}, Now: testClock}
	if err := v.Verify(h, req.Payload); !errors.Is(err, verify.ErrMissingHeaders) {
		t.Errorf("a verifier of webhook- names: %v, want ErrMissingHeaders", err)
	}
	v.HeaderPrefix = "svix-"
	if err := v.Verify(h, req.Payload); err != nil {
		t.Errorf("the svix- headers do not verify: %v", err)
	}
}

func TestCheckHeaders(t *testing.T) {
	long := strings.Repeat("v", attempt.MaxHeaderValueLen+1)
	many := map[string]string{}
	for i := range attempt.MaxHeaders + 1 {
		many["X-H"+strings.Repeat("a", i+1)] = "v"
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		prefix  string
		want    string // a part of the error; "" means accepted
	}{
		{"plain", map[string]string{"X-Api-Key": "abc", "Authorization": "Basic dTpw"}, "", ""},
		{"svix names free webhook-", map[string]string{"Webhook-Source": "x"}, "svix-", ""},
		{"too many", many, "", "at most 20"},
		{"not a token", map[string]string{"X Api": "v"}, "", "not an HTTP header name"},
		{"empty name", map[string]string{"": "v"}, "", "not an HTTP header name"},
		{"reserved", map[string]string{"content-type": "text/plain"}, "", "Hookline or HTTP sets"},
		{"host", map[string]string{"Host": "evil.example"}, "", "Hookline or HTTP sets"},
		{"our prefix", map[string]string{"Webhook-Id": "x"}, "", `starts with "webhook-"`},
		{"custom prefix", map[string]string{"SVIX-signature": "x"}, "svix-", `starts with "svix-"`},
		{"same name twice", map[string]string{"X-Key": "a", "x-key": "b"}, "", "same header"},
		{"control character", map[string]string{"X-Key": "a\r\nInjected: yes"}, "", "without control characters"},
		{"too long", map[string]string{"X-Key": long}, "", "at most 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := attempt.CheckHeaders(tc.headers, tc.prefix)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	for prefix, ok := range map[string]bool{"": true, "svix-": true, "X-Acme-Hook-": true, "webhook": false, "-": false, "a b-": false, "é-": false, strings.Repeat("a", 32) + "-": false} {
		if err := attempt.CheckHeaderPrefix(prefix); (err == nil) != ok {
			t.Errorf("CheckHeaderPrefix(%q) = %v, want accepted %v", prefix, err, ok)
		}
	}
}
