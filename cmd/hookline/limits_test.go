package main_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestRequestLimits attacks `hookline serve` as the issue measured it:
// ten unauthenticated 60 MB POSTs to /v1/events took a node from 53 MB to
// 885 MB of RSS and got no answer within 20 s; a client trickling its body
// kept its connection forever; gRPC decoded 16 MiB before authenticating;
// reflection needed no credentials. Now every refusal comes at once and
// the node's memory stays where it was.
func TestRequestLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const readTimeout = 2 * time.Second
	// A caller may have 16 calls in flight: the ten big POSTs at once fit,
	// so each must meet the refusal the contract names (401, 413), never
	// the bound of calls (429); that bound is tested on a node of its own.
	n := startNode(t, t.TempDir(), "--http-read-timeout", readTimeout.String(), "--max-in-flight-per-caller", "16")
	admin := n.as(t, adminToken)
	for _, id := range []string{"acme"} {
		must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: id, Name: id}))
	}
	acme := n.as(t, must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})).GetApiKey())
	stranger := n.as(t, "")
	idle := n.rssMB(t)
	t.Logf("idle RSS %.1f MB", idle)

	// bigPosts sends ten 60 MB POSTs at once with token and reports each
	// answer's status and how long it took to come.
	bigPosts := func(t *testing.T, token string, chunked bool, want int) {
		var wg sync.WaitGroup
		answers := make([]int, 10)
		took := make([]time.Duration, 10)
		for i := range answers {
			wg.Go(func() {
				answers[i], took[i] = bigPost(t, n.httpAddr, token, 60<<20, chunked)
			})
		}
		wg.Wait()
		after := n.rssMB(t)
		slowest := slices.Max(took)
		t.Logf("ten 60 MB POSTs: answers %v, slowest %v; RSS %.1f MB -> %.1f MB", answers, slowest.Round(time.Millisecond), idle, after)
		if after-idle > 50 {
			t.Errorf("RSS grew by %.1f MB, want at most 50", after-idle)
		}
		if slowest > 5*time.Second {
			t.Errorf("the slowest answer took %v, want at once", slowest)
		}
		for i, code := range answers {
			if code != want {
				t.Errorf("POST %d answered %d, want %d", i, code, want)
			}
		}
	}

	t.Run("ten unauthenticated 60 MB POSTs answer 401", func(t *testing.T) {
		bigPosts(t, "", false, http.StatusUnauthorized)
	})
	t.Run("ten authenticated 60 MB POSTs answer 413", func(t *testing.T) {
		bigPosts(t, acme.token, false, http.StatusRequestEntityTooLarge)
	})
	t.Run("ten chunked 60 MB POSTs answer 413", func(t *testing.T) {
		bigPosts(t, acme.token, true, http.StatusRequestEntityTooLarge)
	})

	t.Run("a trickled body loses its connection at the read timeout", func(t *testing.T) {
		held := trickle(t, n.httpAddr, acme.token, 200*time.Millisecond)
		t.Logf("trickling client held its connection %v (read timeout %v)", held.Round(time.Millisecond), readTimeout)
		if held > readTimeout+2*time.Second {
			t.Fatalf("connection held %v, want about the read timeout %v", held, readTimeout)
		}
	})

	t.Run("calls in flight are bounded per caller", func(t *testing.T) {
		// On a node whose callers may have two calls in flight, two
		// trickling requests take acme's two slots (until the read
		// timeout); a third call of acme is refused at once, another
		// tenant's passes.
		m := startNode(t, t.TempDir(), "--http-read-timeout", readTimeout.String(), "--max-in-flight-per-caller", "2")
		madmin := m.as(t, adminToken)
		for _, id := range []string{"acme", "globex"} {
			must(madmin.tenants().CreateTenant(madmin.ctx(), &controlv1.CreateTenantRequest{TenantId: id, Name: id}))
		}
		macme := m.as(t, must(madmin.tenants().IssueApiKey(madmin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})).GetApiKey())
		mglobex := m.as(t, must(madmin.tenants().IssueApiKey(madmin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "globex"})).GetApiKey())
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { holdSlot(t, m.httpAddr, macme.token) })
		}
		waitFor(t, func() (int, bool) {
			code, _, _ := macme.do("GET", "/v1/webhook-endpoints", nil, 0)
			return code, code == http.StatusTooManyRequests
		})
		if code, body, err := mglobex.do("GET", "/v1/webhook-endpoints", nil, 0); err != nil || code != http.StatusOK {
			t.Fatalf("another tenant: %d %s %v", code, body, err)
		}
		wg.Wait()
		if code, body, err := macme.do("GET", "/v1/webhook-endpoints", nil, 0); err != nil || code != http.StatusOK {
			t.Fatalf("acme once its slots are free: %d %s %v", code, body, err)
		}
	})

	t.Run("gRPC refuses an unauthenticated 15 MiB message before reading it", func(t *testing.T) {
		before := n.rssMB(t)
		start := time.Now()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				_, err := stranger.events().Publish(stranger.ctx(), &controlv1.PublishRequest{EventId: "x", Type: "a.b", Payload: make([]byte, 15<<20)})
				if status.Code(err) != codes.Unauthenticated {
					t.Errorf("got %v, want Unauthenticated", err)
				}
			})
		}
		wg.Wait()
		after := n.rssMB(t)
		t.Logf("ten unauthenticated 15 MiB gRPC calls: %v; RSS %.1f MB -> %.1f MB", time.Since(start).Round(time.Millisecond), before, after)
		if after-idle > 50 {
			t.Errorf("RSS grew by %.1f MB over idle, want at most 50", after-idle)
		}
	})

	t.Run("reflection needs credentials", func(t *testing.T) {
		list := func(a *api) error {
			stream, err := reflectionpb.NewServerReflectionClient(a.cc).ServerReflectionInfo(a.ctx())
			if err != nil {
				return err
			}
			// Send reports a stream the server ended as io.EOF; Recv gives
			// its status.
			if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
				return err
			}
			_, err = stream.Recv()
			return err
		}
		wantCode(t, list(stranger), codes.Unauthenticated)
		if err := list(acme); err != nil {
			t.Fatalf("reflection with a key: %v", err)
		}
		// Health stays open to load balancers.
		if code, _, err := stranger.do("GET", "/healthz", nil, 0); err != nil || code != http.StatusOK {
			t.Fatalf("healthz: %d %v", code, err)
		}
	})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// do sends one REST request with the api's token (none when empty) on a
// connection of its own, and returns the status and the answer's text.
// length is the Content-Length to declare; -1 sends the body chunked.
func (a *api) do(method, path string, body io.Reader, length int64) (int, string, error) {
	req, err := http.NewRequest(method, "http://"+a.n.httpAddr+path, body)
	if err != nil {
		return 0, "", err
	}
	if body == nil {
		req.Body = nil
	}
	req.ContentLength = length
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// bigPost sends a POST of size zero bytes to /v1/events with token (none
// when empty), as curl does: the body is written while the answer is read,
// and the answer counts as soon as its status line arrives, whatever
// becomes of the rest of the body. It returns the status and how long it
// took from the headers to the status line.
func bigPost(t *testing.T, addr, token string, size int64, chunked bool) (int, time.Duration) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0, 0
	}
	defer conn.Close()
	head := "POST /v1/events HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", size)
	}
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Error(err)
		return 0, 0
	}
	go func() {
		chunk := make([]byte, 64<<10)
		for sent := int64(0); sent < size; sent += int64(len(chunk)) {
			var err error
			if chunked {
				_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk)
			} else {
				_, err = conn.Write(chunk)
			}
			if err != nil {
				return // the server answered and closed: expected
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	took := time.Since(start)
	if err != nil {
		t.Errorf("no answer after %v: %v", took, err)
		return 0, took
	}
	resp.Body.Close()
	return resp.StatusCode, took
}

// rssMB returns the node's resident set size in MB, from /proc.
func (n *node) rssMB(t *testing.T) float64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc to read the RSS from: %v", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// trickle sends an authenticated POST that declares a 1,000-byte body and
// then writes one byte every gap, until the server closes the connection;
// it returns how long the connection lasted.
func trickle(t *testing.T, addr, token string, gap time.Duration) time.Duration {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", addr, token)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // the answer, if any, then EOF
		close(closed)
	}()
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return time.Since(start)
		case <-tick.C:
			if _, err := conn.Write([]byte{' '}); err != nil {
				<-closed
				return time.Since(start)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the server kept a trickling connection for 30 s")
		}
	}
}

// holdSlot holds one of the caller's slots with a request whose body never
// comes, until the server's read timeout ends it. A request refused 429
// (the test's own probes may have taken the slot first) is sent again.
func holdSlot(t *testing.T, addr, token string) {
	for range 100 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n ", addr, token)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return // held until the read timeout
		}
	}
	t.Error("no slot held in 100 tries")
}

// TestMaxPlannedFlag: serve --max-planned caps the deliveries one publish
// plans; a publish whose type reaches more endpoints is refused, naming
// the flag, and plans nothing.
func TestMaxPlannedFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	n := startNode(t, t.TempDir(), "--max-planned", "2")
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	acme := n.as(t, must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})).GetApiKey())
	publish := func(i int) error {
		_, err := acme.events().Publish(acme.ctx(), &controlv1.PublishRequest{Type: "order.shipped", EventId: fmt.Sprintf("ord_%d", i), Payload: []byte(`{}`)})
		return err
	}
	for i := range 3 {
		must(acme.endpoints().CreateEndpoint(acme.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
			Url: fmt.Sprintf("http://127.0.0.1:9/in/%d", i), EventTypes: []string{"order.shipped"}}}))
		err := publish(i)
		switch {
		case i < 2 && err != nil:
			t.Fatalf("publish to %d endpoints with --max-planned 2: %v", i+1, err)
		case i == 2 && (status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--max-planned")):
			t.Fatalf("publish to 3 endpoints with --max-planned 2: %v; want FAILED_PRECONDITION naming --max-planned", err)
		}
	}
}
