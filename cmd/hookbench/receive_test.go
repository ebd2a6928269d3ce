// The tests are in package main: hookbench is a command, and the scenarios
// use the receiver in-process, so its Go type is what they test. The
// binary's own surface is driven through run(), as main does.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookline/hookline/attempt"
)

// startReceiver runs a receiver on loopback until the test ends.
func startReceiver(t *testing.T, secrets []string, def Behaviour) *Receiver {
	t.Helper()
	r, err := NewReceiver("127.0.0.1:0", secrets, def)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("receiver: %v", err)
		}
	})
	return r
}

func newSecret(t *testing.T) string {
	t.Helper()
	s, err := attempt.NewSecret(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signed is one webhook signed as Hookline signs it.
func signed(t *testing.T, url, id, body, secret string) *http.Request {
	t.Helper()
	key, err := attempt.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := attempt.Sign(id, now, []byte(body), []attempt.Secret{{Version: 1, Key: key}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	return req
}

// post sends one signed webhook as Hookline does and returns the answer.
func post(t *testing.T, client *http.Client, url, id, body, secret string) (*http.Response, error) {
	t.Helper()
	resp, err := client.Do(signed(t, url, id, body, secret))
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// wantStatus posts like post and checks the answer's status.
func wantStatus(t *testing.T, want int, client *http.Client, url, id, body, secret string) *http.Response {
	t.Helper()
	resp, err := post(t, client, url, id, body, secret)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d", resp.StatusCode, want)
	}
	return resp
}

func admin(t *testing.T, r *Receiver, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, "http://"+r.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestReceiver(t *testing.T) {
	def1, def2, own := newSecret(t), newSecret(t), newSecret(t)
	r := startReceiver(t, []string{def1, def2}, Behaviour{})
	if err := r.SetSecret("ep1", own); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{}

	// The endpoint's own secret verifies it; the defaults do not.
	wantStatus(t, 200, c, r.URL("ep1"), "d1", `{"a":1}`, own)
	wantStatus(t, 200, c, r.URL("ep1"), "d1", `{"a":1}`, own)  // a duplicate
	wantStatus(t, 200, c, r.URL("ep1"), "d1", `{"a":2}`, own)  // and other bytes
	wantStatus(t, 401, c, r.URL("ep1"), "d9", `{"a":1}`, def1) // wrong secret
	// Any of several default secrets verifies the other paths.
	wantStatus(t, 200, c, "http://"+r.Addr()+"/hooks", "d2", `{}`, def2)

	// Behaviour changes at run time, over the admin path.
	if code := admin(t, r, "/admin/behaviour/ep2", `{"status_mix":"503","retry_after":"5s"}`); code != 204 {
		t.Fatalf("set behaviour: %d", code)
	}
	if code := admin(t, r, "/admin/behaviour/ep2", `{"status_mix":"abc"}`); code != 400 {
		t.Fatalf("bad mix: %d", code)
	}
	if code := admin(t, r, "/admin/secret/ep2", `{"secrets":["`+own+`"]}`); code != 204 {
		t.Fatalf("set secret: %d", code)
	}
	resp := wantStatus(t, 503, c, r.URL("ep2"), "d3", `{}`, own)
	if got := resp.Header.Get("Retry-After"); got != "5" {
		t.Fatalf("Retry-After %q, want 5", got)
	}
	r.SetBehaviour("ep2", Behaviour{})
	wantStatus(t, 200, c, r.URL("ep2"), "d3", `{}`, own)

	// A hanging endpoint holds the request until the caller gives up.
	r.SetBehaviour("ep3", Behaviour{Hang: true})
	r.SetSecret("ep3", own)
	short := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := post(t, short, r.URL("ep3"), "d4", `{}`, own); err == nil {
		t.Fatal("a hanging endpoint answered")
	}

	want := Stats{Requests: 8, BadSignature: 1, Attempts: 7, Unique: 4, Succeeded: 3, Duplicates: 2, DuplicateIDs: 1,
		Retries: 3, BodyMismatch: 1, Hung: 1, MaxAttempts: 3, ByStatus: map[string]int{"200": 5, "503": 1, "hung": 1}}
	if diff := cmp.Diff(want, r.Stats()); diff != "" {
		t.Errorf("Stats() (-want +got):\n%s", diff)
	}
	// GET /stats answers the same counts, and the ids on request.
	resp, err := http.Get("http://" + r.Addr() + "/stats?ids=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Stats
		IDs map[string]Record `json:"ids"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.Stats); diff != "" {
		t.Errorf("GET /stats (-want +got):\n%s", diff)
	}
	if d1 := got.IDs["d1"]; d1.Attempts != 3 || d1.Successes != 3 || d1.Endpoint != "ep1" || d1.FirstSeen.IsZero() {
		t.Errorf("record of d1: %+v", d1)
	}
	if d3 := got.IDs["d3"]; d3.Attempts != 2 || d3.Successes != 1 || !d3.FirstOK.After(d3.FirstSeen) {
		t.Errorf("record of d3: %+v", d3)
	}
	if ok, attempts := r.SucceededFor([]string{"ep1", "ep2"}); ok != 2 || attempts != 5 {
		t.Errorf("SucceededFor = %d, %d; want 2, 5", ok, attempts)
	}
}

func TestReceiverLatency(t *testing.T) {
	secret := newSecret(t)
	r := startReceiver(t, []string{secret}, Behaviour{Latency: 100 * time.Millisecond})
	start := time.Now()
	wantStatus(t, 200, http.DefaultClient, r.URL("x"), "l1", `{}`, secret)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("answered after %v, want at least the 100 ms latency", d)
	}
}

func TestParseMix(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []StatusWeight
		err  bool
	}{
		{"empty", "", nil, false},
		{"bare", "429", []StatusWeight{{429, 1}}, false},
		{"weights", "200:0.9, 500:0.1", []StatusWeight{{200, 0.9}, {500, 0.1}}, false},
		{"not a status", "abc", nil, true},
		{"out of range", "700", nil, true},
		{"bad weight", "200:x", nil, true},
		{"negative weight", "200:-1", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMix(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("ParseMix(%q) error %v, want error %v", tc.in, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A mix answers with its statuses in about their proportions.
	b := Behaviour{Mix: []StatusWeight{{200, 3}, {500, 1}}}
	n := map[int]int{}
	for range 4000 {
		n[b.status()]++
	}
	if n[200]+n[500] != 4000 || n[500] < 800 || n[500] > 1200 {
		t.Errorf("mix 200:3,500:1 drew %v", n)
	}
}

func TestRaw(t *testing.T) {
	secret := newSecret(t)
	r := startReceiver(t, []string{secret}, Behaviour{})
	res, err := Raw(context.Background(), RawConfig{URL: r.URL(rawEndpoint), Secret: secret, Workers: 4, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if res.Succeeded == 0 || res.PerSec <= 0 || st.BadSignature != 0 || st.Duplicates != 0 {
		t.Fatalf("raw %+v, receiver %+v", res, st)
	}
	// Requests cut off by the end of the duration may have reached the
	// receiver without their answer being counted.
	if st.Succeeded < res.Succeeded || st.Succeeded > res.Sent {
		t.Fatalf("receiver counted %d, raw sent %d and counted %d", st.Succeeded, res.Sent, res.Succeeded)
	}
	t.Logf("raw loop on loopback, 4 workers: %.0f deliveries/s", res.PerSec)

	// Against a receiver that refuses everything, raw says what to check.
	bad := startReceiver(t, []string{secret}, Behaviour{Mix: []StatusWeight{{500, 1}}})
	_, err = Raw(context.Background(), RawConfig{URL: bad.URL(rawEndpoint), Secret: secret, Workers: 1, Duration: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "answering 2xx") {
		t.Fatalf("raw against 500s: %v", err)
	}
	if err := (RawConfig{URL: "http://x", Secret: "nope"}).Validate(); !errors.Is(err, attempt.ErrInvalidSecret) {
		t.Fatalf("bad secret: %v", err)
	}
}

// watchList keeps what a receiver's watcher hears.
type watchList struct {
	mu   sync.Mutex // guards seen
	seen []Watched
}

func (w *watchList) watched(x Watched) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, x)
}

// TestReceiverWatchesEveryHost: a receiver listening on a second host
// serves the same endpoints there; its watcher hears every request with
// the host it was sent to and its answer; a secret added verifies beside
// the first; an echoing endpoint answers with the body's first bytes.
func TestReceiverWatchesEveryHost(t *testing.T) {
	r := startReceiver(t, nil, Behaviour{})
	first, second := newSecret(t), newSecret(t)
	if err := r.SetSecret("ep", first); err != nil {
		t.Fatal(err)
	}
	other, err := r.ListenAlso("127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &watchList{}
	r.SetWatcher(w)
	wantStatus(t, 200, http.DefaultClient, r.URLAt(other, "ep"), "msg_1", `{"a":1}`, first)
	wantStatus(t, 401, http.DefaultClient, r.URL("ep"), "msg_2", `{"a":2}`, second)
	if err := r.AddSecret("ep", second); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, 200, http.DefaultClient, r.URL("ep"), "msg_3", `{"a":3}`, second)
	wantStatus(t, 200, http.DefaultClient, r.URL("ep"), "msg_4", `{"a":4}`, first)

	w.mu.Lock()
	var got []string
	for _, x := range w.seen {
		got = append(got, fmt.Sprintf("%s %s %s %d", x.Host, x.Endpoint, x.Header.Get("webhook-id"), x.Status))
		if x.Answered.Before(x.Arrived) {
			t.Errorf("%s answered before it arrived", x.Header.Get("webhook-id"))
		}
	}
	w.mu.Unlock()
	want := []string{other + " ep msg_1 200", r.Addr() + " ep msg_2 401", r.Addr() + " ep msg_3 200", r.Addr() + " ep msg_4 200"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("watched (-want +got):\n%s", diff)
	}

	r.SetBehaviour("ep", Behaviour{Echo: true})
	body := `{"m":"` + strings.Repeat("x", 100) + `"}`
	resp, err := http.DefaultClient.Do(signed(t, r.URL("ep"), "msg_5", body, first))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	echo, _ := io.ReadAll(resp.Body)
	if string(echo) != body[:echoBytes] {
		t.Errorf("the echo is %q, want the body's first %d bytes", echo, echoBytes)
	}
}
