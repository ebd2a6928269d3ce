package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

const adminToken = "e2e-admin-token"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/hookline once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hookline-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "hookline")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// node is a running `hookline serve` process.
type node struct {
	cmd      *exec.Cmd
	grpcAddr string
	httpAddr string
	logs     *bytes.Buffer
	logsMu   *sync.Mutex
	done     chan error
}

var servingLine = regexp.MustCompile(`hookline serving" grpc_addr=(\S+) http_addr=(\S+)`)

// startNode runs `hookline serve` on loopback ports chosen by the system
// and waits until it says where it serves.
func startNode(t *testing.T, dataDir string, extra ...string) *node {
	t.Helper()
	return startNodeEnv(t, dataDir, nil, extra...)
}

// startNodeEnv is startNode with more environment variables (KEY=value),
// which override the defaults (admin token, no master key).
func startNodeEnv(t *testing.T, dataDir string, env []string, extra ...string) *node {
	t.Helper()
	args := append([]string{"serve", "--data", dataDir,
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--cluster-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--allow-private-targets"}, extra...)
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(append(os.Environ(), "HOOKLINE_ADMIN_TOKEN="+adminToken, "HOOKLINE_MASTER_KEY="), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{cmd: cmd, logs: &bytes.Buffer{}, logsMu: &sync.Mutex{}, done: make(chan error, 1)}
	ready := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			n.logsMu.Lock()
			n.logs.WriteString(line + "\n")
			n.logsMu.Unlock()
			if m := servingLine.FindStringSubmatch(line); m != nil {
				ready <- [2]string{m[1], m[2]}
			}
		}
		n.done <- cmd.Wait()
	}()
	select {
	case addrs := <-ready:
		n.grpcAddr, n.httpAddr = addrs[0], addrs[1]
	case err := <-n.done:
		t.Fatalf("hookline serve exited before serving: %v\n%s", err, n.output())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("hookline serve did not start within 60 s\n%s", n.output())
	}
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *node) output() string {
	n.logsMu.Lock()
	defer n.logsMu.Unlock()
	return n.logs.String()
}

// stop sends SIGTERM and waits for a clean exit.
func (n *node) stop(t *testing.T) {
	t.Helper()
	if n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.done:
		if err != nil {
			t.Errorf("hookline serve exited with %v\n%s", err, n.output())
		}
	case <-time.After(60 * time.Second):
		_ = n.cmd.Process.Kill()
		t.Errorf("hookline serve did not stop within 60 s of SIGTERM\n%s", n.output())
	}
}

// api is a caller of one node with one token, over gRPC and REST.
type api struct {
	t     *testing.T
	n     *node
	token string
	cc    *grpc.ClientConn
}

func (n *node) as(t *testing.T, token string) *api {
	cc, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &api{t: t, n: n, token: token, cc: cc}
}

func (a *api) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	a.t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+a.token)
}

func (a *api) tenants() controlv1.TenantServiceClient { return controlv1.NewTenantServiceClient(a.cc) }
func (a *api) endpoints() controlv1.EndpointServiceClient {
	return controlv1.NewEndpointServiceClient(a.cc)
}
func (a *api) events() controlv1.EventServiceClient { return controlv1.NewEventServiceClient(a.cc) }

// rest calls the REST API and decodes the JSON answer into out (if not nil).
func (a *api) rest(method, path string, body any, out any) int {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+a.n.httpAddr+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	if resp.StatusCode >= 300 {
		a.t.Logf("%s %s -> %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// must returns v, or fails the test (by panicking, which the testing
// package reports with the stack) when err is set.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want code %v", err, code)
	}
}

// TestControlPlane drives `hookline serve` over gRPC and REST: tenants,
// keys, endpoints, rotation, publishing, idempotency, isolation, restart and
// rebuild of the projections from the log.
func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	data := t.TempDir()
	n := startNode(t, data)
	admin := n.as(t, adminToken)

	// Tenants and keys: acme over gRPC, globex over REST.
	acme := must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	if acme.GetTenantId() != "acme" {
		t.Fatalf("tenant id %q", acme.GetTenantId())
	}
	key := must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme", Name: "billing"}))
	if !strings.HasPrefix(key.GetApiKey(), "hk_") {
		t.Fatalf("api key %q", key.GetApiKey())
	}
	var globex map[string]any
	if code := admin.rest("POST", "/v1/tenants", map[string]any{"tenant_id": "globex", "name": "Globex"}, &globex); code != 200 {
		t.Fatalf("create tenant over REST: %d", code)
	}
	var gkey struct {
		APIKey string `json:"api_key"`
	}
	if code := admin.rest("POST", "/v1/tenants/globex/api-keys", map[string]any{"name": "ops"}, &gkey); code != 200 || gkey.APIKey == "" {
		t.Fatalf("issue key over REST: %d %+v", code, gkey)
	}
	// A tenant key cannot use the admin API.
	tenantA := n.as(t, key.GetApiKey())
	_, err := tenantA.tenants().CreateTenant(tenantA.ctx(), &controlv1.CreateTenantRequest{Name: "sneaky"})
	wantCode(t, err, codes.PermissionDenied)
	stranger := n.as(t, "hk_not_a_key")
	_, err = stranger.endpoints().ListEndpoints(stranger.ctx(), &controlv1.ListEndpointsRequest{})
	wantCode(t, err, codes.Unauthenticated)

	// Create an endpoint over REST: the secret comes back once.
	var created struct {
		Endpoint struct {
			EndpointID    string `json:"endpoint_id"`
			ConfigVersion string `json:"config_version"`
		} `json:"endpoint"`
		Secret string `json:"secret"`
	}
	if code := tenantA.rest("POST", "/v1/webhook-endpoints", map[string]any{
		"url": "http://127.0.0.1:9/hooks", "event_types": []string{"invoice.paid", "invoice.voided"},
	}, &created); code != 200 {
		t.Fatalf("create endpoint: %d", code)
	}
	epID := created.Endpoint.EndpointID
	if !strings.HasPrefix(created.Secret, "whsec_") || created.Endpoint.ConfigVersion != "1" {
		t.Fatalf("create answered %+v", created)
	}
	var got map[string]any
	tenantA.rest("GET", "/v1/webhook-endpoints/"+epID, nil, &got)
	if raw, _ := json.Marshal(got); bytes.Contains(raw, []byte(created.Secret)) || bytes.Contains(raw, []byte(`"secret"`)) {
		t.Fatalf("GET shows the secret: %s", raw)
	}
	// A rejected URL names the rule and writes nothing.
	if code := tenantA.rest("POST", "/v1/webhook-endpoints", map[string]any{"url": "ftp://example.com/x", "event_types": []string{"a.b"}}, nil); code != 400 {
		t.Fatalf("ftp URL: got %d, want 400", code)
	}

	// List over gRPC.
	list := must(tenantA.endpoints().ListEndpoints(tenantA.ctx(), &controlv1.ListEndpointsRequest{}))
	if len(list.GetEndpoints()) != 1 || list.GetEndpoints()[0].GetEndpointId() != epID {
		t.Fatalf("list: %v", list)
	}

	// Patch over REST: config version goes up, untouched fields stay.
	var patched struct {
		ConfigVersion string `json:"config_version"`
		Settings      struct {
			URL        string   `json:"url"`
			EventTypes []string `json:"event_types"`
		} `json:"settings"`
	}
	if code := tenantA.rest("PATCH", "/v1/webhook-endpoints/"+epID, map[string]any{"event_types": []string{"invoice.paid"}}, &patched); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	if patched.ConfigVersion != "2" || patched.Settings.URL != "http://127.0.0.1:9/hooks" || len(patched.Settings.EventTypes) != 1 {
		t.Fatalf("patch answered %+v", patched)
	}

	// Rotate over gRPC: both secrets live during the overlap.
	rot := must(tenantA.endpoints().RotateSecret(tenantA.ctx(), &controlv1.RotateSecretRequest{EndpointId: epID}))
	if rot.GetSecret() == created.Secret || len(rot.GetEndpoint().GetSecrets()) != 2 {
		t.Fatalf("rotate: secrets %v", rot.GetEndpoint().GetSecrets())
	}

	// Publish over REST: the JSON value is stored as its compact bytes.
	var pub struct {
		EventID    string `json:"event_id"`
		Duplicate  bool   `json:"duplicate"`
		Deliveries []struct {
			DeliveryID string `json:"delivery_id"`
			EndpointID string `json:"endpoint_id"`
		} `json:"deliveries"`
	}
	body := map[string]any{"event_id": "inv_1001", "type": "invoice.paid", "data": json.RawMessage(`{"invoice": "1001", "amount": 12345678901234567890}`)}
	if code := tenantA.rest("POST", "/v1/events", body, &pub); code != 200 {
		t.Fatalf("publish: %d", code)
	}
	if len(pub.Deliveries) != 1 || pub.Deliveries[0].EndpointID != epID || pub.Duplicate {
		t.Fatalf("publish answered %+v", pub)
	}
	first := pub
	// Again: the same answer, marked duplicate.
	pub.Deliveries = nil
	if code := tenantA.rest("POST", "/v1/events", body, &pub); code != 200 || !pub.Duplicate || len(pub.Deliveries) != 1 || pub.Deliveries[0] != first.Deliveries[0] {
		t.Fatalf("republish: %d %+v", code, pub)
	}
	// Over gRPC too.
	again := must(tenantA.events().Publish(tenantA.ctx(), &controlv1.PublishRequest{EventId: "inv_1001", Type: "invoice.paid", Payload: []byte(`{"invoice":"1001","amount":12345678901234567890}`)}))
	if !again.GetDuplicate() || again.GetDeliveries()[0].GetDeliveryId() != first.Deliveries[0].DeliveryID {
		t.Fatalf("gRPC republish: %v", again)
	}
	// A different payload under the same id is a conflict.
	_, err = tenantA.events().Publish(tenantA.ctx(), &controlv1.PublishRequest{EventId: "inv_1001", Type: "invoice.paid", Payload: []byte(`{"invoice":"1001","amount":1}`)})
	wantCode(t, err, codes.AlreadyExists)
	if code := tenantA.rest("POST", "/v1/events", map[string]any{"event_id": "inv_1001", "type": "invoice.paid", "data": map[string]any{"x": 1}}, nil); code != 409 {
		t.Fatalf("conflicting REST publish: %d, want 409", code)
	}
	// Bad input names the field.
	_, err = tenantA.events().Publish(tenantA.ctx(), &controlv1.PublishRequest{EventId: "bad id", Type: "invoice.paid", Payload: []byte(`{}`)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "event_id") {
		t.Fatalf("bad event id: %v", err)
	}

	// Isolation: globex's key sees and touches nothing of acme's.
	tenantB := n.as(t, gkey.APIKey)
	_, err = tenantB.endpoints().GetEndpoint(tenantB.ctx(), &controlv1.GetEndpointRequest{EndpointId: epID})
	wantCode(t, err, codes.NotFound)
	_, err = tenantB.endpoints().UpdateEndpoint(tenantB.ctx(), &controlv1.UpdateEndpointRequest{EndpointId: epID, Settings: &controlv1.EndpointSettings{Url: "http://127.0.0.1:9/evil"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"url"}}})
	wantCode(t, err, codes.NotFound)
	_, err = tenantB.endpoints().DeleteEndpoint(tenantB.ctx(), &controlv1.DeleteEndpointRequest{EndpointId: epID})
	wantCode(t, err, codes.NotFound)
	_, err = tenantB.endpoints().RotateSecret(tenantB.ctx(), &controlv1.RotateSecretRequest{EndpointId: epID})
	wantCode(t, err, codes.NotFound)
	_, err = tenantB.endpoints().ListEndpoints(tenantB.ctx(), &controlv1.ListEndpointsRequest{TenantId: "acme"})
	wantCode(t, err, codes.PermissionDenied)
	if l := must(tenantB.endpoints().ListEndpoints(tenantB.ctx(), &controlv1.ListEndpointsRequest{})); len(l.GetEndpoints()) != 0 {
		t.Fatalf("globex lists %v", l.GetEndpoints())
	}
	if code := tenantB.rest("GET", "/v1/webhook-endpoints/"+epID, nil, nil); code != 404 {
		t.Fatalf("globex GET acme's endpoint over REST: %d, want 404", code)
	}
	// Globex publishing the same event id is its own event: no acme endpoint.
	gpub := must(tenantB.events().Publish(tenantB.ctx(), &controlv1.PublishRequest{EventId: "inv_1001", Type: "invoice.paid", Payload: []byte(`{}`)}))
	if len(gpub.GetDeliveries()) != 0 || gpub.GetDuplicate() {
		t.Fatalf("globex publish planned %v", gpub)
	}
	ep := must(tenantA.endpoints().GetEndpoint(tenantA.ctx(), &controlv1.GetEndpointRequest{EndpointId: epID}))
	if ep.GetConfigVersion() != 2 || ep.GetSettings().GetUrl() != "http://127.0.0.1:9/hooks" {
		t.Fatalf("acme's endpoint changed: %v", ep)
	}

	// Restart: everything is kept.
	n.stop(t)
	n = startNode(t, data)
	tenantA = n.as(t, key.GetApiKey())
	ep2 := must(tenantA.endpoints().GetEndpoint(tenantA.ctx(), &controlv1.GetEndpointRequest{EndpointId: epID}))
	if ep2.GetConfigVersion() != 2 || len(ep2.GetSecrets()) != 2 {
		t.Fatalf("after restart: %v", ep2)
	}
	listBefore := must(tenantA.endpoints().ListEndpoints(tenantA.ctx(), &controlv1.ListEndpointsRequest{}))

	// Delete the projections: the node rebuilds them from the log to the
	// same answers (the key authenticates, the list is the same).
	n.stop(t)
	if err := os.RemoveAll(filepath.Join(data, "projections")); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, data)
	tenantA = n.as(t, key.GetApiKey())
	listAfter := waitFor(t, func() (*controlv1.ListEndpointsResponse, bool) {
		l, err := tenantA.endpoints().ListEndpoints(tenantA.ctx(), &controlv1.ListEndpointsRequest{})
		return l, err == nil && len(l.GetEndpoints()) == 1
	})
	if a, b := listBefore.GetEndpoints()[0], listAfter.GetEndpoints()[0]; a.GetEndpointId() != b.GetEndpointId() || a.GetConfigVersion() != b.GetConfigVersion() || a.GetSettings().GetUrl() != b.GetSettings().GetUrl() {
		t.Fatalf("rebuilt list differs:\n%v\n%v", a, b)
	}
	again = must(tenantA.events().Publish(tenantA.ctx(), &controlv1.PublishRequest{EventId: "inv_1001", Type: "invoice.paid", Payload: []byte(`{"invoice":"1001","amount":12345678901234567890}`)}))
	if !again.GetDuplicate() {
		t.Fatalf("after rebuild, republish: %v", again)
	}
	compact := []byte(`{"invoice":"1001","amount":12345678901234567890}`)
	var stored struct {
		Payload []byte `json:"payload"`
		Sealed  bool   `json:"sealed"`
	}
	if code := tenantA.rest("GET", "/v1/events/inv_1001", nil, &stored); code != 200 || !bytes.Equal(stored.Payload, compact) || !stored.Sealed {
		t.Fatalf("GET /v1/events/inv_1001: %d, payload %q sealed %v; want the compact bytes, sealed", code, stored.Payload, stored.Sealed)
	}
	n.stop(t)

	// Nothing new was written by the repeated publishes: the event stream
	// holds EventPublished + DeliveriesPlanned, with the exact bytes.
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(data, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recs, err := l.ReadStream(context.Background(), events.EventStream("acme", "inv_1001"), events.Forwards, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Type != "EventPublished" || recs[1].Type != "DeliveriesPlanned" {
		t.Fatalf("event stream holds %d records", len(recs))
	}
	if bytes.Contains(recs[0].Data, compact) {
		t.Fatalf("the log holds the payload in clear; it is sealed under the tenant's data key")
	}
}

// waitFor polls f until it reports done, for at most 30 s.
func waitFor[T any](t *testing.T, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, ok := f()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 30 s (last: %v)", v)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, not a wait for an event
	}
}

func (a *api) deliveriesClient() controlv1.DeliveryServiceClient {
	return controlv1.NewDeliveryServiceClient(a.cc)
}

func fieldMask(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

// TestJoinWithEmbeddedStoreRefused: the embedded log serves one node, so
// joining a cluster with it is refused with an error that says what to do.
func TestJoinWithEmbeddedStoreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	cmd := exec.Command(binary(t), "serve", "--data", t.TempDir(), "--join", "127.0.0.1:7946",
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--cluster-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "HOOKLINE_MASTER_KEY=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("serve --join with the embedded store started:\n%s", out)
	}
	if !strings.Contains(string(out), "embedded log serves one node only") || !strings.Contains(string(out), "--store") {
		t.Fatalf("unclear refusal:\n%s", out)
	}
}
