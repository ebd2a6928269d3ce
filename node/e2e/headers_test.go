package e2e_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestStaticHeadersAndPrefix delivers through a node to a receiver with an
// existing contract: it wants an API key header and Svix's header names.
// Every request carries the key and a secret header (shown by name only)
// and verifies under the svix- names; an update of the key reaches the
// next attempts and keeps the secret header; settings that would clash
// with Hookline's own headers are refused, naming the field.
func TestStaticHeadersAndPrefix(t *testing.T) {
	n, _ := runE2E(t, node.Config{DataDir: t.TempDir()})
	c := n.tenant(t, "acme", nil)

	var (
		mu       sync.Mutex
		keys     = map[string]string{} // svix-id → X-Api-Key of its request
		problems []string
		wh       *standardwebhooks.Webhook
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body strings.Builder
		_, _ = io.Copy(&body, r.Body)
		std := http.Header{}
		for _, f := range []string{"id", "timestamp", "signature"} {
			std.Set("webhook-"+f, r.Header.Get("svix-"+f))
		}
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("webhook-id") != "" {
			problems = append(problems, "a webhook-id header was sent beside svix-id")
		} else if err := wh.Verify([]byte(body.String()), std); err != nil {
			problems = append(problems, "svix- headers do not verify: "+err.Error())
		}
		if r.Header.Get("Authorization") != "Bearer e2e-token" {
			problems = append(problems, "the secret header was "+strconv.Quote(r.Header.Get("Authorization")))
		}
		keys[r.Header.Get("svix-id")] = r.Header.Get("X-Api-Key")
	}))
	t.Cleanup(srv.Close)

	settings := &controlv1.EndpointSettings{
		Url: srv.URL + "/in", EventTypes: []string{"order.paid"},
		Headers: map[string]string{"X-Api-Key": "key-1"}, HeaderPrefix: "svix-",
		SecretHeaders: map[string]string{"Authorization": "Bearer e2e-token"},
	}
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_contract", Settings: settings})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if wh, err = standardwebhooks.NewWebhook(created.GetSecret()); err != nil {
		t.Fatal(err)
	}
	if s := created.GetEndpoint().GetSettings(); s.GetHeaders()["X-Api-Key"] != "key-1" || s.GetHeaderPrefix() != "svix-" ||
		len(s.GetSecretHeaders()) != 0 || len(s.GetSecretHeaderNames()) != 1 {
		t.Fatalf("created endpoint's settings: %v", s)
	}

	first := c.publish(t, "evt_1", "order.paid")
	waitKey := func(ids []string, want string) {
		t.Helper()
		eventually(t, 30*time.Second, "the deliveries with "+want, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if keys[id] != want {
					return false
				}
			}
			return true
		})
	}
	waitKey(first, "key-1")

	if _, err := c.endpoints.UpdateEndpoint(c.ctx(), &controlv1.UpdateEndpointRequest{
		EndpointId: created.GetEndpoint().GetEndpointId(), Settings: &controlv1.EndpointSettings{Headers: map[string]string{"X-Api-Key": "key-2"}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"headers"}},
	}); err != nil {
		t.Fatalf("update the key: %v", err)
	}
	waitKey(c.publish(t, "evt_2", "order.paid"), "key-2")
	mu.Lock()
	if len(problems) > 0 {
		t.Errorf("the receiver refused %d requests, e.g. %s", len(problems), problems[0])
	}
	mu.Unlock()

	for _, bad := range []*controlv1.EndpointSettings{
		{Url: srv.URL, EventTypes: []string{"order.paid"}, Headers: map[string]string{"Webhook-Signature": "forged"}},
		{Url: srv.URL, EventTypes: []string{"order.paid"}, Headers: map[string]string{"Svix-Id": "x"}, HeaderPrefix: "svix-"},
		{Url: srv.URL, EventTypes: []string{"order.paid"}, Headers: map[string]string{"Host": "internal.example"}},
		{Url: srv.URL, EventTypes: []string{"order.paid"}, HeaderPrefix: "svix"},
	} {
		_, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{Settings: bad})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "settings.header") {
			t.Errorf("create with headers %v, prefix %q: %v; want INVALID_ARGUMENT naming the field", bad.GetHeaders(), bad.GetHeaderPrefix(), err)
		}
	}
}
