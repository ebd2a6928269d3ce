package main_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestCLIAnswers: what the client commands print says what the node
// knows. A tenant without a quota of its own reads as the node's
// defaults, never "0 attempts/s"; endpoints get shows the circuit; a
// publish under schema enforcement warn shows the violation; deliveries
// list says what each pending delivery waits for (its backoff, its
// ordering key's head, a paused endpoint, a pull endpoint's consumer, a
// lease) and its last attempt when it had no HTTP status (a refused
// connection, a pull).
func TestCLIAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	n := clienttest.Start(t, clienttest.Options{})
	key := n.Tenant(t, "acme")
	as := func(token string) func(t *testing.T, args ...string) string {
		return func(t *testing.T, args ...string) string {
			t.Helper()
			out, errOut, err := hookline(t, append(args, "--addr", n.Addr, "--token", token)...)
			if err != nil {
				t.Fatalf("hookline %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			}
			return out
		}
	}
	admin, tenant := as(clienttest.AdminToken), as(key)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(failing.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + lis.Addr().String() + "/in"
	lis.Close()
	create := func(t *testing.T, args ...string) string {
		t.Helper()
		var r struct {
			Endpoint struct {
				EndpointID string `json:"endpoint_id"`
			} `json:"endpoint"`
		}
		if err := json.Unmarshal([]byte(tenant(t, append([]string{"endpoints", "create", "--json"}, args...)...)), &r); err != nil || r.Endpoint.EndpointID == "" {
			t.Fatalf("endpoints create %v: %v", args, err)
		}
		return r.Endpoint.EndpointID
	}
	// waitList polls deliveries list of one type until each pattern
	// matches a line of it.
	waitList := func(t *testing.T, typ string, patterns ...string) string {
		t.Helper()
		var out string
		for deadline := time.Now().Add(30 * time.Second); ; {
			out = tenant(t, "deliveries", "list", "--type", typ)
			all := true
			for _, p := range patterns {
				all = all && regexp.MustCompile(`(?m)`+p).MatchString(out)
			}
			if all {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("deliveries list --type %s never showed %q:\n%s", typ, patterns, out)
			}
			time.Sleep(200 * time.Millisecond) // poll interval
		}
	}

	t.Run("a tenant without a quota", func(t *testing.T) {
		out := admin(t, "tenants", "create", "--id", "bare", "--name", "Bare")
		if strings.Contains(out, "0 attempts/s") || !strings.Contains(out, "quota    none of its own: the node's defaults") {
			t.Errorf("tenants create printed:\n%s", out)
		}
	})
	t.Run("a publish under warn", func(t *testing.T) {
		tenant(t, "event-types", "put", "--type", "order.checked", "--schema", `{"type":"object","properties":{"total":{"type":"number","minimum":0}}}`)
		tenant(t, "tenants", "update", "--schema-enforcement", "warn")
		out := tenant(t, "events", "publish", "--id", "chk_1", "--type", "order.checked", "--data", `{"total":-3}`)
		if !strings.Contains(out, "schema violation") || !strings.Contains(out, `"/total"`) || !strings.Contains(out, "minimum") {
			t.Errorf("events publish printed:\n%s", out)
		}
	})
	t.Run("backoff, ordering key, circuit", func(t *testing.T) {
		ep := create(t, "--url", failing.URL+"/in", "--types", "order.paid", "--ordering", "key")
		if out := tenant(t, "endpoints", "get", "--id", ep); !strings.Contains(out, "circuit      closed") {
			t.Errorf("endpoints get shows no circuit:\n%s", out)
		}
		tenant(t, "events", "publish", "--id", "ord_1", "--type", "order.paid", "--ordering-key", "k1", "--data", `{"n":1}`)
		waitList(t, "order.paid", `pending +attempts=1 +last=503 .* waits: backoff until \S+Z$`)
		tenant(t, "events", "publish", "--id", "ord_2", "--type", "order.paid", "--ordering-key", "k1", "--data", `{"n":2}`)
		waitList(t, "order.paid", `pending +attempts=0 +last=- .* waits: key_blocked$`)
		get := tenant(t, "deliveries", "get", "--id", firstID(t, tenant(t, "deliveries", "list", "--type", "order.paid", "--limit", "1")))
		if !strings.Contains(get, `ordering key "k1" goes one delivery at a time`) {
			t.Errorf("deliveries get of the second delivery says no wait:\n%s", get)
		}
	})
	t.Run("a refused connection", func(t *testing.T) {
		create(t, "--url", closed, "--types", "order.refused")
		tenant(t, "events", "publish", "--id", "ref_1", "--type", "order.refused", "--data", `{}`)
		waitList(t, "order.refused", `pending +attempts=1 +last=connect `)
	})
	t.Run("a paused endpoint", func(t *testing.T) {
		ep := create(t, "--url", failing.URL+"/in", "--types", "order.held")
		tenant(t, "endpoints", "pause", "--id", ep)
		tenant(t, "events", "publish", "--id", "held_1", "--type", "order.held", "--data", `{}`)
		waitList(t, "order.held", `pending +attempts=0 .* waits: paused$`)
	})
	t.Run("a pull endpoint", func(t *testing.T) {
		ep := create(t, "--delivery", "pull", "--types", "order.pulled")
		tenant(t, "events", "publish", "--id", "pull_1", "--type", "order.pulled", "--data", `{}`)
		waitList(t, "order.pulled", `pending +attempts=0 .* waits: pull$`)
		if out := tenant(t, "endpoints", "pull", "--id", ep, "--lease", "60s"); !strings.Contains(out, "pull_1") {
			t.Fatalf("endpoints pull:\n%s", out)
		}
		out := waitList(t, "order.pulled", `pending .* waits: leased until \S+Z$`)
		c := n.Client(t, key)
		if _, err := c.Ack(t.Context(), &controlv1.AckDeliveriesRequest{EndpointId: ep, DeliveryIds: []string{firstID(t, out)}}); err != nil {
			t.Fatal(err)
		}
		waitList(t, "order.pulled", `succeeded +attempts=1 +last=pulled `)
	})
	t.Run("waits over REST", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+n.Server().HTTPAddr()+"/v1/webhook-deliveries?event_type=order.held&with_waits=true", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct {
			Deliveries []struct {
				Wait struct{ Reason, Detail string }
			}
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || len(body.Deliveries) != 1 || body.Deliveries[0].Wait.Reason != "paused" ||
			!strings.Contains(body.Deliveries[0].Wait.Detail, "hookline endpoints resume") {
			t.Errorf("GET …?with_waits=true: %s %+v %v", res.Status, body, err)
		}
	})
}

// firstID is the delivery id that starts the first line of a list.
func firstID(t *testing.T, list string) string {
	t.Helper()
	f := strings.Fields(list)
	if len(f) == 0 || !strings.HasPrefix(f[0], "dlv_") {
		t.Fatalf("no delivery in:\n%s", list)
	}
	return f[0]
}
