package main_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// hooklineExit runs the binary with args and returns its output and exit code.
func hooklineExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "HOOKLINE_TOKEN="+adminToken)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("hookline %v: %v", args, err)
	}
	return string(out), 0
}

// TestReconcileCommand: a node started with --faults hiding a success from
// its projections; `hookline reconcile` against it (and POST /v1/reconcile)
// reports the discrepancy with the delivery's id and exits 1; stopped, its
// data directory is reconciled offline, repaired, and found clean, and the
// node restarted on it (without faults) reconciles clean.
func TestReconcileCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	rcv := &receiver{seen: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	data := t.TempDir()
	n := startNode(t, data, "--faults", "hide=AttemptSucceeded:1")
	if !strings.Contains(n.output(), "FAULT INJECTION IS ON") || !strings.Contains(n.output(), "hide=AttemptSucceeded:1") {
		t.Errorf("the node does not announce its faults:\n%s", n.output())
	}
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	key := must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"}))
	api := n.as(t, key.GetApiKey())
	created := must(api.endpoints().CreateEndpoint(api.ctx(), &controlv1.CreateEndpointRequest{
		EndpointId: "ep_1", Settings: &controlv1.EndpointSettings{Url: srv.URL + "/in", EventTypes: []string{"a"}},
	}))
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.wh = wh
	rcv.mu.Unlock()
	must(api.events().Publish(api.ctx(), &controlv1.PublishRequest{EventId: "e1", Type: "a", Payload: []byte(`{}`)}))
	id := events.DeliveryID("acme", "e1", created.GetEndpoint().GetEndpointId()) // a chosen id gets its tenant's tag
	waitFor(t, func() (int, bool) { u, _, _ := rcv.counts(); return u, u == 1 })
	// Another delivery, so that the projections' checkpoints are written
	// past the hidden success (else a restart reads it again, and heals).
	must(api.events().Publish(api.ctx(), &controlv1.PublishRequest{EventId: "e2", Type: "a", Payload: []byte(`{}`)}))
	waitFor(t, func() (int, bool) { u, _, _ := rcv.counts(); return u, u == 2 })

	out, code := hooklineExit(t, "reconcile", "--addr", n.grpcAddr)
	if code != 1 || !strings.Contains(out, "NOT CLEAN") || !strings.Contains(out, "due_after_end") || !strings.Contains(out, id) {
		t.Errorf("reconcile against the node: exit %d\n%s", code, out)
	}
	var rep struct {
		Clean         bool   `json:"clean"`
		RunID         string `json:"run_id"`
		Discrepancies []struct {
			Kind        string   `json:"kind"`
			DeliveryIDs []string `json:"delivery_ids"`
		} `json:"discrepancies"`
	}
	if code := admin.rest(http.MethodPost, "/v1/reconcile", map[string]any{"skip_replay": true}, &rep); code != http.StatusOK || rep.Clean || rep.RunID == "" || len(rep.Discrepancies) == 0 {
		t.Errorf("POST /v1/reconcile: %d %+v", code, rep)
	}
	if code := api.rest(http.MethodPost, "/v1/reconcile", map[string]any{}, nil); code != http.StatusForbidden {
		t.Errorf("POST /v1/reconcile with a tenant key: %d, want 403", code)
	}
	n.stop(t)

	out, code = hooklineExit(t, "reconcile", "--data", data)
	if code != 1 || !strings.Contains(out, "due_after_end") || !strings.Contains(out, id) {
		t.Errorf("offline: exit %d\n%s", code, out)
	}
	out, code = hooklineExit(t, "reconcile", "--data", data, "--repair")
	if code != 0 || !strings.Contains(out, "REPAIRED") {
		t.Errorf("offline repair: exit %d\n%s", code, out)
	}
	out, code = hooklineExit(t, "reconcile", "--data", data, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Clean {
		t.Errorf("offline after the repair: exit %d\n%s", code, out)
	}

	n = startNode(t, data)
	out, code = hooklineExit(t, "reconcile", "--addr", n.grpcAddr)
	if code != 0 || !strings.Contains(out, "CLEAN") {
		t.Errorf("the restarted node: exit %d\n%s", code, out)
	}
	if _, total, _ := rcv.counts(); total != 2 {
		t.Errorf("the receiver got %d requests, want 2", total)
	}
}
