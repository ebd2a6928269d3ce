package main_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// serveFails runs `hookline serve` with env and args and returns its
// output, failing the test if it started.
func serveFails(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"serve",
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--cluster-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), "HOOKLINE_ADMIN_TOKEN="+adminToken, "HOOKLINE_MASTER_KEY="), env...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("hookline serve did not exit within 60 s:\n%s", out)
	}
	if err == nil {
		t.Fatalf("hookline serve started and exited cleanly:\n%s", out)
	}
	return string(out)
}

// TestSharedLogNeedsTheClustersMasterKey: a node on a shared log refuses
// to start without a configured master key (each would make its own
// development key and none could open the others' secrets), and a node
// whose key is not the one the log's secrets are sealed under refuses too.
func TestSharedLogNeedsTheClustersMasterKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	f := newFleet(t)
	store := []string{"--store", f.dsn, "--store-schema", f.schema}

	t.Run("no master key", func(t *testing.T) {
		out := serveFails(t, nil, append(store, "--data", t.TempDir())...)
		if !strings.Contains(out, "master key") || !strings.Contains(out, "HOOKLINE_MASTER_KEY") {
			t.Fatalf("unclear refusal:\n%s", out)
		}
	})
	a := f.start(t.TempDir())
	t.Run("another master key", func(t *testing.T) {
		other := randomBase64(32)
		out := serveFails(t, []string{"HOOKLINE_MASTER_KEY=" + other, "HOOKLINE_CLUSTER_SECRET=" + f.secret},
			append(store, "--data", t.TempDir(), "--join", a.gossip(t))...)
		if !strings.Contains(out, "lacks a master key the log's secrets use") {
			t.Fatalf("unclear refusal:\n%s", out)
		}
	})
	t.Run("the cluster's master key", func(t *testing.T) {
		b := f.start(t.TempDir(), a.gossip(t))
		waitMembers(t, a, b)
	})
}

// TestMasterKeyRotation rotates the master key of a running deployment as
// the README says, on the real binary: the new key first beside the old
// one, `hookline keys reseal`, then the new key alone. Deliveries keep the
// same signing secret throughout (the receiver verifies every one), and the
// old key, once retired, can no longer start a node.
func TestMasterKeyRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	keyA, keyB := randomBase64(32), randomBase64(32)
	idA := keyID(t, keyA)
	data := t.TempDir()
	rcv := &verifyingReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	start := func(key string) *node { return startNodeEnv(t, data, []string{"HOOKLINE_MASTER_KEY=" + key}) }
	n := start(keyA)
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	key := must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})).GetApiKey()
	acme := n.as(t, key)
	created := must(acme.endpoints().CreateEndpoint(acme.ctx(), &controlv1.CreateEndpointRequest{
		Settings: &controlv1.EndpointSettings{Url: srv.URL + "/in", EventTypes: []string{"order.paid"}, SignEd25519: false},
	}))
	rcv.setSecret(t, created.GetSecret())
	deliver := func(n *node, id string) {
		t.Helper()
		api := n.as(t, key)
		must(api.events().Publish(api.ctx(), &controlv1.PublishRequest{EventId: id, Type: "order.paid", Payload: []byte(`{"id":"` + id + `"}`)}))
		waitFor(t, func() (string, bool) { return rcv.status(), rcv.verified(id) })
	}
	deliver(n, "o1")
	n.stop(t)

	// Step 1: every node gets the new key first, the old one after it.
	n = start(keyB + "," + keyA)
	deliver(n, "o2")
	// Step 2: reseal.
	out, err := exec.Command(binary(t), "keys", "reseal", "--addr", n.grpcAddr, "--token", adminToken).CombinedOutput()
	if err != nil {
		t.Fatalf("hookline keys reseal: %v\n%s", err, out)
	}
	t.Logf("hookline keys reseal:\n%s", out)
	if !strings.Contains(string(out), "endpoints:    1") || !strings.Contains(string(out), "retired keys: "+idA+"\n") {
		t.Fatalf("reseal answered:\n%s", out)
	}
	n.stop(t)

	// Step 3: the new key alone opens every secret: the same one.
	n = start(keyB)
	deliver(n, "o3")
	n.stop(t)

	// The retired key can no longer start a node, alone or as current.
	for _, spec := range []string{keyA, keyA + "," + keyB} {
		out := serveFails(t, []string{"HOOKLINE_MASTER_KEY=" + spec}, "--data", data)
		if !strings.Contains(out, "master key") {
			t.Fatalf("unclear refusal with %d keys:\n%s", strings.Count(spec, ",")+1, out)
		}
		if strings.Contains(out, keyA) || strings.Contains(out, keyB) {
			t.Fatalf("the refusal shows a key:\n%s", out)
		}
	}
	if rcv.bad() != 0 {
		t.Fatalf("%d deliveries failed verification", rcv.bad())
	}
}

func keyID(t *testing.T, spec string) string {
	t.Helper()
	kr, err := seal.ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	return kr.CurrentID()
}

// verifyingReceiver accepts webhooks whose signature verifies with the
// secret it was given, and remembers the event ids it verified.
type verifyingReceiver struct {
	mu     sync.Mutex // guards the fields below
	wh     *standardwebhooks.Webhook
	seen   map[string]bool
	failed int
}

func (r *verifyingReceiver) setSecret(t *testing.T, secret string) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.wh, r.seen = wh, map[string]bool{}
	r.mu.Unlock()
}

func (r *verifyingReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wh == nil || r.wh.Verify(body.Bytes(), req.Header) != nil {
		r.failed++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.seen[req.Header.Get("webhook-event-id")] = true
	w.WriteHeader(http.StatusNoContent)
}

func (r *verifyingReceiver) verified(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id]
}

func (r *verifyingReceiver) bad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *verifyingReceiver) status() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("verified %d, failed %d", len(r.seen), r.failed)
}
