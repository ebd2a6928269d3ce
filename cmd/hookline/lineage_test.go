package main_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/client/clienttest"
)

// TestDeliveryLineageCommand: `events publish --traceparent` prints the
// trace, and `deliveries get` prints the delivery's lineage table: a
// scheduled attempt answered 503 with Retry-After 1, the retry it
// decided, and the retry that succeeded, each with its traceparent, a
// child of the producer's span, and the digest of the body sent.
func TestDeliveryLineageCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var calls atomic.Int32
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer rcv.Close()
	n := clienttest.Start(t, clienttest.Options{})
	tenant := []string{"--addr", n.Addr, "--token", n.Tenant(t, "acme")}
	if _, errOut, err := hookline(t, append([]string{"endpoints", "create", "--id", "ep_1", "--url", rcv.URL + "/in", "--types", "invoice.paid"}, tenant...)...); err != nil {
		t.Fatalf("endpoints create: %v %s", err, errOut)
	}
	out, errOut, err := hookline(t, append([]string{"events", "publish", "--id", "inv_1", "--type", "invoice.paid", "--data", `{"a":1}`,
		"--traceparent", producer, "--tracestate", "rojo=1"}, tenant...)...)
	if err != nil || !strings.Contains(out, "trace 4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Fatalf("events publish: %v\n%s%s", err, out, errOut)
	}
	id := regexp.MustCompile(`delivery (\S+)`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no delivery in %s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, err = hookline(t, append([]string{"deliveries", "get", "--id", id[1]}, tenant...)...)
		if err != nil {
			t.Fatalf("deliveries get: %v %s", err, errOut)
		}
		if strings.Contains(out, "succeeded") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery did not succeed:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond) // a poll interval, not a wait for an event
	}
	t.Logf("deliveries get:\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\s+#\s+started\s+trigger\s+result\s+time\s+waited\s+signed\s+body sha256$`),
		regexp.MustCompile(`(?m)^\s+1\s+\S+\s+scheduled\s+503\s.*\sv1\s+[0-9a-f]{12}… \(7 B\)$`),
		regexp.MustCompile(`(?m)^\s+2\s+\S+\s+retry 1\s+200\s.*\sv1\s+[0-9a-f]{12}… \(7 B\)$`),
		regexp.MustCompile(`(?m)^  traceparent  00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01 \(child of the producer's span 00f067aa0ba902b7\)$`),
		// The larger of the Retry-After and the backoff drawn decides.
		regexp.MustCompile(`(?m)^  decided      retry after (the receiver's Retry-After of 1s \(honoured\), above the backoff of \S+ drawn from \[0, 5s\)|a backoff of \S+ drawn from \[0, 5s\), above the receiver's Retry-After of 1s \(honoured\)); next at \S+$`),
		regexp.MustCompile(`(?m)^  response     200 .*sha256 4062edaf750f… \(11 B\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("deliveries get: no line matching %s in\n%s", want, out)
		}
	}
}
