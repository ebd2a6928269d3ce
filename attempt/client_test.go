package attempt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/verify"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testClock() time.Time { return testNow }

// countingListener counts accepted connections, to prove that a refused
// destination was never connected to.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

type receiver struct {
	*httptest.Server
	conns *countingListener
}

// newReceiver starts an httptest TLS receiver on 127.0.0.1. Its certificate
// is valid for 127.0.0.1, ::1 and example.com.
func newReceiver(t testing.TB, h http.Handler, http2 bool) *receiver {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	cl := &countingListener{Listener: srv.Listener}
	srv.Listener = cl
	srv.EnableHTTP2 = http2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &receiver{Server: srv, conns: cl}
}

func (r *receiver) port(t *testing.T) uint16 {
	t.Helper()
	u, err := url.Parse(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

func (r *receiver) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(r.Certificate())
	return &tls.Config{RootCAs: pool}
}

// devClient admits loopback receivers (AllowPrivate), as the development
// flag does.
func devClient(t testing.TB, r *receiver, cfg attempt.ClientConfig) *attempt.Client {
	t.Helper()
	if cfg.Policy == nil {
		cfg.Policy = &attempt.Policy{AllowPrivate: true}
	}
	if cfg.TLSConfig == nil && r != nil {
		cfg.TLSConfig = r.tlsConfig()
	}
	c := attempt.NewClient(cfg)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

var testSecret = attempt.Secret{Version: 3, Key: bytes.Repeat([]byte("k"), 32)}

func testRequest(rawURL string) attempt.Request {
	return attempt.Request{
		URL:           rawURL,
		DeliveryID:    "dlv_01HZX",
		EventID:       "evt_42",
		EventType:     "invoice.paid",
		OccurredAt:    time.Date(2026, 2, 28, 23, 59, 58, 500_000_000, time.UTC),
		SchemaVersion: "2",
		Payload:       []byte(`{"invoice":"in_1","amount":4200}`),
		Secrets:       []attempt.Secret{testSecret},
		Now:           testClock,
	}
}

func TestDoSuccess(t *testing.T) {
	type seen struct {
		header http.Header
		body   []byte
		proto  int
	}
	got := make(chan seen, 1)
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Clone(), body, r.ProtoMajor}
		io.WriteString(w, `{"received":true}`)
	}), true)
	c := devClient(t, rcv, attempt.ClientConfig{})

	old := attempt.Secret{Version: 2, Key: bytes.Repeat([]byte("o"), 24)}
	seed := bytes.Repeat([]byte("e"), 32)
	req := testRequest(rcv.URL + "/hooks?tenant=t1")
	req.Secrets = []attempt.Secret{testSecret, old}
	req.SigningKey = seed
	req.Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req.Tracestate = "rojo=00f067aa0ba902b7"
	o := c.Do(context.Background(), req)

	if _, ok := o.Class.(attempt.Success); !ok || o.Status != 200 || o.Error != "" {
		t.Fatalf("outcome = %v, status %d, error %q; want success 200", o.Class, o.Status, o.Error)
	}
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		t.Errorf("error class = %v, want UNSPECIFIED", o.ErrorClass)
	}
	wantBody := []byte(`{"received":true}`)
	sum := sha256.Sum256(wantBody)
	if !bytes.Equal(o.ResponseSHA256, sum[:]) || !bytes.Equal(o.ResponsePrefix, wantBody) || o.ResponseBytes != int64(len(wantBody)) || o.ResponseTruncated {
		t.Errorf("response digest/prefix/bytes = %x %q %d %v", o.ResponseSHA256, o.ResponsePrefix, o.ResponseBytes, o.ResponseTruncated)
	}
	if sent := sha256.Sum256(req.Payload); !bytes.Equal(o.BodySHA256, sent[:]) || o.BodyBytes != int64(len(req.Payload)) {
		t.Errorf("body digest %x, %d bytes; want the payload's %x, %d", o.BodySHA256, o.BodyBytes, sent, len(req.Payload))
	}
	if diff := cmp.Diff([]int32{3, 2}, o.KeyVersions); diff != "" {
		t.Errorf("key versions (-want +got):\n%s", diff)
	}
	if !o.Started.Equal(testNow) || !o.Finished.Equal(testNow) || o.Latency != 0 {
		t.Errorf("times = %v %v %v, want the injected clock", o.Started, o.Finished, o.Latency)
	}

	s := <-got
	if s.proto != 2 {
		t.Errorf("protocol HTTP/%d, want HTTP/2", s.proto)
	}
	if !bytes.Equal(s.body, req.Payload) {
		t.Errorf("body = %q, want the stored payload", s.body)
	}
	wantHeaders := map[string]string{
		"Webhook-Id":             "dlv_01HZX",
		"Webhook-Timestamp":      strconv.FormatInt(testNow.Unix(), 10),
		"Webhook-Event-Type":     "invoice.paid",
		"Webhook-Event-Id":       "evt_42",
		"Webhook-Occurred-At":    "2026-02-28T23:59:58.5Z",
		"Webhook-Schema-Version": "2",
		"Webhook-Key-Version":    "3 2",
		"Traceparent":            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"Tracestate":             "rojo=00f067aa0ba902b7",
		"Content-Type":           "application/json",
		"User-Agent":             "Hookline/1",
		"Accept-Encoding":        "",
	}
	for k, want := range wantHeaders {
		if v := s.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if n := len(strings.Fields(s.header.Get("Webhook-Signature"))); n != 3 {
		t.Errorf("webhook-signature has %d signatures, want 3 (two v1, one v1a)", n)
	}

	// Every key verifies alone, with our verifier and with the reference
	// library.
	for _, key := range req.Secrets {
		v := verify.Verifier{Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(key.Key)}, Now: testClock}
		if err := v.Verify(s.header, s.body); err != nil {
			t.Errorf("verify with secret version %d: %v", key.Version, err)
		}
		wh, _ := standardwebhooks.NewWebhookRaw(key.Key)
		if err := wh.VerifyIgnoringTimestamp(s.body, s.header); err != nil {
			t.Errorf("standard-webhooks library, secret version %d: %v", key.Version, err)
		}
	}
	v := verify.Verifier{PublicKeys: []string{attempt.PublicKey(seed)}, Now: testClock}
	if err := v.Verify(s.header, s.body); err != nil {
		t.Errorf("verify v1a: %v", err)
	}
}

func TestDoStatuses(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
		class      attempt.Class
		wantRA     time.Duration
		hasRA      bool
		wantDelay  time.Duration
	}{
		{name: "200", status: 200, class: attempt.Success{}},
		{name: "204", status: 204, class: attempt.Success{}},
		{name: "301", status: 301, class: attempt.Permanent{}},
		{name: "400", status: 400, class: attempt.Permanent{}},
		{name: "401", status: 401, class: attempt.Permanent{}},
		{name: "404", status: 404, class: attempt.Permanent{}},
		{name: "408", status: 408, class: attempt.Retryable{}},
		{name: "410 gone", status: 410, class: attempt.Permanent{Gone: true}},
		{name: "429 seconds", status: 429, retryAfter: "120", class: attempt.Retryable{}, wantRA: 2 * time.Minute, hasRA: true, wantDelay: 2 * time.Minute},
		{name: "429 date", status: 429, retryAfter: testNow.Add(90 * time.Second).Format(http.TimeFormat), class: attempt.Retryable{}, wantRA: 90 * time.Second, hasRA: true, wantDelay: 90 * time.Second},
		{name: "429 past date", status: 429, retryAfter: testNow.Add(-time.Hour).Format(http.TimeFormat), class: attempt.Retryable{}, hasRA: true, wantDelay: time.Second},
		{name: "429 huge", status: 429, retryAfter: "99999999999999999999", class: attempt.Retryable{}, wantRA: 24 * time.Hour, hasRA: true, wantDelay: time.Hour},
		{name: "429 garbage", status: 429, retryAfter: "soon", class: attempt.Retryable{}},
		{name: "503 zero", status: 503, retryAfter: "0", class: attempt.Retryable{}, hasRA: true, wantDelay: time.Second},
		{name: "500 ignores retry-after", status: 500, retryAfter: "60", class: attempt.Retryable{}, wantRA: time.Minute, hasRA: true},
		{name: "502", status: 502, class: attempt.Retryable{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
			}), false)
			o := devClient(t, rcv, attempt.ClientConfig{}).Do(context.Background(), testRequest(rcv.URL))
			if o.Status != tt.status || o.Class != tt.class {
				t.Fatalf("outcome = %d %v (%s), want %d %v", o.Status, o.Class, o.Error, tt.status, tt.class)
			}
			wantEC := hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS
			if _, ok := tt.class.(attempt.Success); ok {
				wantEC = hooklinev1.ErrorClass_ERROR_CLASS_UNSPECIFIED
			}
			if o.ErrorClass != wantEC {
				t.Errorf("error class = %v, want %v", o.ErrorClass, wantEC)
			}
			if o.RetryAfter != tt.wantRA || o.HasRetryAfter != tt.hasRA || o.RetryDelay() != tt.wantDelay {
				t.Errorf("retry-after = %v %v delay %v, want %v %v delay %v", o.RetryAfter, o.HasRetryAfter, o.RetryDelay(), tt.wantRA, tt.hasRA, tt.wantDelay)
			}
		})
	}
}

func TestDoRedirectNotFollowed(t *testing.T) {
	var followed atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/hooks", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere?token=abc", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	rcv := newReceiver(t, mux, false)
	o := devClient(t, rcv, attempt.ClientConfig{}).Do(context.Background(), testRequest(rcv.URL+"/hooks"))
	if o.Status != http.StatusFound || o.Class != (attempt.Permanent{}) {
		t.Fatalf("outcome = %d %v, want 302 permanent", o.Status, o.Class)
	}
	if followed.Load() != 0 {
		t.Error("the redirect was followed")
	}
	if strings.Contains(o.Error, "token") {
		t.Errorf("error %q repeats the redirect target", o.Error)
	}
}

func TestDoLargeBody(t *testing.T) {
	body := make([]byte, 100<<10)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write(body)
	}), false)
	o := devClient(t, rcv, attempt.ClientConfig{}).Do(context.Background(), testRequest(rcv.URL))
	want := sha256.Sum256(body[:64<<10])
	if !bytes.Equal(o.ResponseSHA256, want[:]) {
		t.Errorf("digest = %x, want SHA-256 of the first 64 KiB %x", o.ResponseSHA256, want)
	}
	if !bytes.Equal(o.ResponsePrefix, body[:256]) {
		t.Errorf("prefix = %q, want the first 256 bytes", o.ResponsePrefix)
	}
	if o.ResponseBytes != 64<<10 || !o.ResponseTruncated {
		t.Errorf("bytes read = %d truncated %v, want 65536 true", o.ResponseBytes, o.ResponseTruncated)
	}
	if o.Class != (attempt.Retryable{}) || o.Status != 500 {
		t.Errorf("outcome = %d %v, want 500 retryable", o.Status, o.Class)
	}
}

func TestDoHangingReceiver(t *testing.T) {
	release := make(chan struct{})
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}), false)
	t.Cleanup(func() { close(release) }) // runs before rcv.Close
	req := testRequest(rcv.URL)
	req.Timeout = 200 * time.Millisecond
	o := devClient(t, rcv, attempt.ClientConfig{}).Do(context.Background(), req)
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT || o.Class != (attempt.Retryable{}) || o.Status != 0 {
		t.Fatalf("outcome = %v %v %d (%s), want TIMEOUT retryable", o.ErrorClass, o.Class, o.Status, o.Error)
	}
	if want := "no answer within the attempt timeout (200ms)"; o.Error != want {
		t.Errorf("error = %q, want %q", o.Error, want)
	}
}

func TestDoResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}), false)
	t.Cleanup(func() { close(release) })
	c := devClient(t, rcv, attempt.ClientConfig{ResponseHeaderTimeout: 100 * time.Millisecond})
	o := c.Do(context.Background(), testRequest(rcv.URL))
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT {
		t.Fatalf("error class = %v (%s), want TIMEOUT", o.ErrorClass, o.Error)
	}
}

func TestDoConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := devClient(t, nil, attempt.ClientConfig{})
	o := c.Do(context.Background(), testRequest("https://"+addr+"/hooks?token=supersecret"))
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_CONNECT || o.Class != (attempt.Retryable{}) {
		t.Fatalf("outcome = %v %v (%s), want CONNECT retryable", o.ErrorClass, o.Class, o.Error)
	}
	if strings.Contains(o.Error, "supersecret") {
		t.Errorf("error %q contains the URL query", o.Error)
	}
}

func TestDoResponseHeadersTooLarge(t *testing.T) {
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("x", 20<<10))
		w.WriteHeader(http.StatusOK)
	}), false)
	o := devClient(t, rcv, attempt.ClientConfig{}).Do(context.Background(), testRequest(rcv.URL))
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_RESET || o.Class != (attempt.Retryable{}) || o.Status != 0 {
		t.Fatalf("outcome = %v %v %d (%s), want RESET retryable with no status", o.ErrorClass, o.Class, o.Status, o.Error)
	}
	if !strings.Contains(o.Error, "exceeded") {
		t.Errorf("error %q does not say the headers were too large", o.Error)
	}
}

func TestDoTLSFailure(t *testing.T) {
	rcv := newReceiver(t, http.NotFoundHandler(), false)
	c := devClient(t, rcv, attempt.ClientConfig{TLSConfig: &tls.Config{RootCAs: x509.NewCertPool()}})
	o := c.Do(context.Background(), testRequest(rcv.URL))
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TLS || o.Class != (attempt.Retryable{OpensCircuitSooner: true}) {
		t.Fatalf("outcome = %v %v (%s), want TLS retryable opening the circuit sooner", o.ErrorClass, o.Class, o.Error)
	}
}

func TestDoCancelled(t *testing.T) {
	rcv := newReceiver(t, http.NotFoundHandler(), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := devClient(t, rcv, attempt.ClientConfig{}).Do(ctx, testRequest(rcv.URL))
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL || o.Class != (attempt.Retryable{}) {
		t.Fatalf("outcome = %v %v (%s), want INTERNAL retryable", o.ErrorClass, o.Class, o.Error)
	}
}

func TestDoIgnoresProxyEnvironment(t *testing.T) {
	// A proxy from the environment that does not exist: if the client
	// used it, the attempt would fail.
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), false)
	o := devClient(t, rcv, attempt.ClientConfig{}).Do(context.Background(), testRequest(rcv.URL))
	if o.Class != (attempt.Success{}) {
		t.Fatalf("outcome = %v (%s), want success without the environment's proxy", o.Class, o.Error)
	}
}

// TestDoRebinding is the DNS rebinding case: the host resolves to a public
// address at registration and to a private one at delivery. The egress
// client must refuse before connecting.
func TestDoRebinding(t *testing.T) {
	var hits atomic.Int64
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }), false)
	port := rcv.port(t)
	rawURL := fmt.Sprintf("https://hooks.example.com:%d/hooks", port)

	tests := []struct {
		name     string
		delivery []string // answers at delivery time
		class    hooklinev1.ErrorClass
	}{
		{"loopback", []string{"127.0.0.1"}, hooklinev1.ErrorClass_ERROR_CLASS_BLOCKED},
		{"public and loopback", []string{"93.184.216.34", "127.0.0.1"}, hooklinev1.ErrorClass_ERROR_CLASS_BLOCKED},
		{"mapped loopback", []string{"::ffff:127.0.0.1"}, hooklinev1.ErrorClass_ERROR_CLASS_BLOCKED},
		{"metadata", []string{"169.254.169.254"}, hooklinev1.ErrorClass_ERROR_CLASS_BLOCKED},
		{"gone from dns", nil, hooklinev1.ErrorClass_ERROR_CLASS_DNS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := newFakeResolver(map[string][]string{"hooks.example.com": {"93.184.216.34"}})
			policy := &attempt.Policy{AllowedPorts: []uint16{port}, Resolver: res}
			stored, err := policy.CheckURL(context.Background(), rawURL)
			if err != nil {
				t.Fatalf("registration: %v", err)
			}

			res.set("hooks.example.com", tt.delivery...)
			before := rcv.conns.accepted.Load()
			c := attempt.NewClient(attempt.ClientConfig{Policy: policy, TLSConfig: rcv.tlsConfig()})
			defer c.CloseIdleConnections()
			o := c.Do(context.Background(), testRequest(stored.String()))

			if o.ErrorClass != tt.class || o.Class != (attempt.Retryable{OpensCircuitSooner: true}) {
				t.Fatalf("outcome = %v %v (%s), want %v retryable opening the circuit sooner", o.ErrorClass, o.Class, o.Error, tt.class)
			}
			if n := rcv.conns.accepted.Load() - before; n != 0 {
				t.Errorf("the receiver accepted %d connections, want none", n)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("the receiver saw %d requests, want none", hits.Load())
	}

	// The control: in development mode the same resolver answer is dialed
	// (pinned) and the request arrives, so the refusals above are the
	// policy's doing and not a broken setup.
	t.Run("development mode connects", func(t *testing.T) {
		res := newFakeResolver(map[string][]string{"hooks.example.com": {"127.0.0.1"}})
		c := devClient(t, rcv, attempt.ClientConfig{Policy: &attempt.Policy{AllowPrivate: true, Resolver: res}})
		o := c.Do(context.Background(), testRequest(rawURL))
		if o.Class != (attempt.Success{}) {
			t.Fatalf("outcome = %v %v (%s), want success", o.ErrorClass, o.Class, o.Error)
		}
		if hits.Load() != 1 {
			t.Errorf("the receiver saw %d requests, want 1", hits.Load())
		}
	})
}

func TestDoBlockedStatically(t *testing.T) {
	tests := []struct {
		name string
		url  string
	}{
		{"plain http", "http://hooks.example.com/"},
		{"port", "https://hooks.example.com:8443/"},
		{"loopback literal", "https://127.0.0.1/"},
		{"localhost", "https://localhost/"},
		{"credentials", "https://u:p@hooks.example.com/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := newFakeResolver(map[string][]string{"hooks.example.com": {"93.184.216.34"}, "localhost": {"127.0.0.1"}})
			c := attempt.NewClient(attempt.ClientConfig{Policy: &attempt.Policy{Resolver: res}})
			o := c.Do(context.Background(), testRequest(tt.url))
			if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_BLOCKED {
				t.Fatalf("error class = %v (%s), want BLOCKED", o.ErrorClass, o.Error)
			}
			if !strings.HasPrefix(o.Error, "url: ") {
				t.Errorf("error %q does not name the broken rule", o.Error)
			}
		})
	}
}

func TestDoConcurrent(t *testing.T) {
	var hits atomic.Int64
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }), true)
	c := devClient(t, rcv, attempt.ClientConfig{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if o := c.Do(context.Background(), testRequest(rcv.URL)); o.Class != (attempt.Success{}) {
				t.Errorf("outcome = %v (%s)", o.Class, o.Error)
			}
		})
	}
	wg.Wait()
	if hits.Load() != 20 {
		t.Errorf("hits = %d, want 20", hits.Load())
	}
}

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status int
		want   attempt.Class
	}{
		{200, attempt.Success{}}, {201, attempt.Success{}}, {299, attempt.Success{}},
		{300, attempt.Permanent{}}, {302, attempt.Permanent{}}, {308, attempt.Permanent{}},
		{400, attempt.Permanent{}}, {403, attempt.Permanent{}}, {404, attempt.Permanent{}}, {422, attempt.Permanent{}},
		{408, attempt.Retryable{}}, {429, attempt.Retryable{}},
		{410, attempt.Permanent{Gone: true}},
		{500, attempt.Retryable{}}, {503, attempt.Retryable{}}, {599, attempt.Retryable{}},
		{199, attempt.Permanent{}}, {600, attempt.Permanent{}},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			got, ec := attempt.ClassifyStatus(tt.status)
			if got != tt.want {
				t.Errorf("ClassifyStatus(%d) = %v, want %v", tt.status, got, tt.want)
			}
			_, success := tt.want.(attempt.Success)
			if success != (ec == hooklinev1.ErrorClass_ERROR_CLASS_UNSPECIFIED) {
				t.Errorf("ClassifyStatus(%d) error class = %v", tt.status, ec)
			}
		})
	}
}

func TestClientConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  attempt.ClientConfig
		ok   bool
	}{
		{"zero", attempt.ClientConfig{}, true},
		{"max timeout", attempt.ClientConfig{Timeout: 30 * time.Second}, true},
		{"above max timeout", attempt.ClientConfig{Timeout: 31 * time.Second}, false},
		{"negative", attempt.ClientConfig{ConnectTimeout: -1}, false},
		{"negative size", attempt.ClientConfig{MaxBodyBytes: -1}, false},
		{"relative proxy", attempt.ClientConfig{Proxy: &url.URL{Path: "proxy"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestDoThroughProxy(t *testing.T) {
	// The proxy address accepts nothing: reaching it at all is a CONNECT
	// error, so a BLOCKED outcome proves the check ran before the proxy.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := ln.Addr().String()
	ln.Close()
	proxy := &url.URL{Scheme: "http", Host: proxyAddr}

	tests := []struct {
		name   string
		answer string
		class  hooklinev1.ErrorClass
	}{
		{"private answer refused before the proxy", "10.0.0.1", hooklinev1.ErrorClass_ERROR_CLASS_BLOCKED},
		{"public answer goes to the proxy", "93.184.216.34", hooklinev1.ErrorClass_ERROR_CLASS_CONNECT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := newFakeResolver(map[string][]string{"hooks.example.com": {tt.answer}})
			c := attempt.NewClient(attempt.ClientConfig{Policy: &attempt.Policy{Resolver: res}, Proxy: proxy})
			o := c.Do(context.Background(), testRequest("https://hooks.example.com/hooks"))
			if o.ErrorClass != tt.class {
				t.Fatalf("error class = %v (%s), want %v", o.ErrorClass, o.Error, tt.class)
			}
		})
	}
}

func TestNewDNSResolver(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	queried := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 512)
		if _, _, err := pc.ReadFrom(buf); err == nil {
			queried <- struct{}{}
		}
	}()

	r := attempt.NewDNSResolver(pc.LocalAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.LookupIPAddr(ctx, "hooks.example.com"); err == nil {
		t.Error("lookup answered by a server that never answers")
	}
	select {
	case <-queried:
	case <-time.After(5 * time.Second):
		t.Error("the query did not reach the chosen DNS server")
	}
}

// BenchmarkDo is one attempt against a loopback receiver over a kept-alive
// TLS connection: its time, and what it allocates (the answer's body is
// read through pooled buffers; io.Copy made a 32 KB one per attempt).
func BenchmarkDo(b *testing.B) {
	rcv := newReceiver(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"received":true}`))
	}), false)
	c := devClient(b, rcv, attempt.ClientConfig{})
	req := testRequest(rcv.URL + "/hook")
	b.ReportAllocs()
	for b.Loop() {
		if o := c.Do(context.Background(), req); o.Status != http.StatusOK {
			b.Fatalf("status %d: %s", o.Status, o.Error)
		}
	}
}
