package main_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/attempt"
)

// receiveProcess is a running `hookline receive`.
type receiveProcess struct {
	url   string
	lines chan string // its stdout, a line each
	cmd   *exec.Cmd
}

// startReceive runs `hookline receive` on a loopback port chosen by the
// system, with env, and waits until it says where it listens.
func startReceive(t *testing.T, env []string, args ...string) *receiveProcess {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"receive", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), "HOOKLINE_RECEIVER_SECRET="), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &receiveProcess{lines: make(chan string, 100), cmd: cmd}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	first := p.next(t)
	m := regexp.MustCompile(`listening on (https?://\S+)`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("hookline receive started with %q; stderr:\n%s", first, stderr.String())
	}
	p.url = m[1]
	return p
}

// next is the process's next line of output.
func (p *receiveProcess) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatal("hookline receive ended its output")
		}
		return line
	case <-time.After(30 * time.Second):
		t.Fatal("hookline receive printed nothing within 30 s")
	}
	return ""
}

// post sends body to p as webhook id of type invoice.paid, signed with
// secret at ts (unsigned when secret is empty), and returns the answer's
// status and the line p printed for it.
func (p *receiveProcess) post(t *testing.T, id, secret string, ts time.Time, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.url+"/in", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-event-type", "invoice.paid")
	if secret != "" {
		key, err := attempt.ParseSecret(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := attempt.Sign(id, ts, body, []attempt.Secret{{Version: 1, Key: key}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, p.next(t)
}

// TestReceive drives `hookline receive` with webhooks signed as Hookline
// signs them: 200 for a good signature with any of the secrets, 401 for
// another secret or a stale timestamp, 413 for a body over 1 MiB; without
// a secret, 200 and "unverified". A GET is a probe: 200, no line. SIGTERM
// stops it cleanly.
func TestReceive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	newSecret := func() string {
		s, err := attempt.NewSecret(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	secret, old, other := newSecret(), newSecret(), newSecret()
	body := []byte(`{"invoice":"inv_1","amount":4200}`)
	now := time.Now()

	t.Run("verifying", func(t *testing.T) {
		p := startReceive(t, []string{"HOOKLINE_RECEIVER_SECRET=" + old + "," + secret})
		res, err := http.Get(p.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET / (a probe): %s, want 200", res.Status)
		}
		for _, tc := range []struct {
			name, id, secret string
			ts               time.Time
			body             []byte
			status           int
			line             string
		}{
			{name: "good signature", id: "msg_1", secret: secret, ts: now, body: body, status: 200, line: `msg_1  invoice.paid  signature ok -> 200  {"invoice":"inv_1","amount":4200}`},
			{name: "the previous secret", id: "msg_2", secret: old, ts: now, body: body, status: 200, line: "msg_2  invoice.paid  signature ok -> 200"},
			{name: "another secret", id: "msg_3", secret: other, ts: now, body: body, status: 401, line: "msg_3  invoice.paid  signature refused: no matching signature -> 401"},
			{name: "stale timestamp", id: "msg_4", secret: secret, ts: now.Add(-10 * time.Minute), body: body, status: 401, line: "msg_4  invoice.paid  signature refused: webhook-timestamp is too old"},
			{name: "unsigned", id: "msg_5", body: body, status: 401, line: "signature refused: missing webhook-id, webhook-timestamp or webhook-signature header -> 401"},
			{name: "body over 1 MiB", id: "msg_6", secret: secret, ts: now, body: bytes.Repeat([]byte("x"), 1<<20+1), status: 413, line: "body over 1048576 bytes -> 413  xxx"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, line := p.post(t, tc.id, tc.secret, tc.ts, tc.body)
				if status != tc.status || !strings.Contains(line, tc.line) {
					t.Errorf("answered %d and printed\n%s\nwant %d and a line with\n%s", status, line, tc.status, tc.line)
				}
			})
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("hookline receive after SIGTERM: %v", err)
		}
	})

	t.Run("without a secret", func(t *testing.T) {
		p := startReceive(t, nil)
		if status, line := p.post(t, "msg_7", other, now, body); status != 200 || !strings.Contains(line, "msg_7  invoice.paid  unverified -> 200") {
			t.Errorf("answered %d and printed %q, want 200 and unverified", status, line)
		}
	})

	t.Run("a secret that is not one", func(t *testing.T) {
		out, errOut, err := hookline(t, "receive", "--addr", "127.0.0.1:0", "--secret", "whsec_not base64")
		if err == nil || !strings.Contains(errOut, "--secret: verify: invalid key") {
			t.Errorf("receive with a bad secret: %v\n%s%s", err, out, errOut)
		}
	})
}
