package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// These tests run a real node in this process (clienttest); one at a time.

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPublish(t *testing.T) {
	n := clienttest.Start(t, clienttest.Options{})
	acme := n.Client(t, n.Tenant(t, "acme"))
	n.Tenant(t, "globex")
	ctx := ctxFor(t)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer rcv.Close()
	ep, err := acme.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: rcv.URL, EventTypes: []string{"invoice.paid"}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := client.Event{ID: "inv_1", Type: "invoice.paid", Payload: []byte(`{"invoice":1}`), ObjectID: "inv", ObjectVersion: 3, OccurredAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}

	t.Run("new", func(t *testing.T) {
		r, err := acme.Publish(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if r.GetDuplicate() || r.GetEventId() != "inv_1" || len(r.GetDeliveries()) != 1 || r.GetDeliveries()[0].GetEndpointId() != ep.GetEndpoint().GetEndpointId() {
			t.Fatalf("publish answered %v", r)
		}
	})
	t.Run("again is a duplicate with the original plan", func(t *testing.T) {
		r, err := acme.Publish(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if !r.GetDuplicate() || len(r.GetDeliveries()) != 1 {
			t.Fatalf("republish answered %v", r)
		}
	})
	t.Run("errors are testable", func(t *testing.T) {
		other := ev
		other.Payload = []byte(`{"invoice":2}`)
		_, err := acme.Publish(ctx, other)
		if !errors.Is(err, client.ErrConflict) || status.Code(err) != codes.AlreadyExists {
			t.Errorf("another payload under the same id: %v, want ErrConflict", err)
		}
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Op != "publish" || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("error %#v", err)
		}

		bad := ev
		bad.ID = "bad id"
		_, err = acme.Publish(ctx, bad)
		if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), "event_id") {
			t.Errorf("bad id: %v, want ErrInvalid naming event_id", err)
		}
		if errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrNotFound) {
			t.Errorf("bad id matches other sentinels: %v", err)
		}

		forGlobex := ev
		forGlobex.TenantID = "globex"
		if _, err := acme.Publish(ctx, forGlobex); !errors.Is(err, client.ErrPermissionDenied) {
			t.Errorf("acme's key publishing for globex: %v, want ErrPermissionDenied", err)
		}
		if _, err := n.Client(t, "hk_nope").Publish(ctx, ev); !errors.Is(err, client.ErrUnauthenticated) {
			t.Errorf("unknown key: %v, want ErrUnauthenticated", err)
		}
		if _, err := n.Client(t, clienttest.AdminToken).Publish(ctx, ev); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("admin without tenant: %v, want ErrInvalid", err)
		}
		_, err = acme.GetEndpoint(ctx, &controlv1.GetEndpointRequest{EndpointId: "ep_missing"})
		if !errors.Is(err, client.ErrNotFound) {
			t.Errorf("missing endpoint: %v, want ErrNotFound", err)
		}
	})
	t.Run("the caller's deadline", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
		defer cancel()
		<-dctx.Done()
		_, err := acme.Publish(dctx, ev)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("publish past its deadline: %v, want context.DeadlineExceeded", err)
		}
	})
}

// countCalls counts the calls of each method made through a client.
type countCalls struct{ publishBatch atomic.Int64 }

func (c *countCalls) interceptor() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/PublishBatch") {
			c.publishBatch.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

func TestPublishBatch(t *testing.T) {
	n := clienttest.Start(t, clienttest.Options{})
	key := n.Tenant(t, "acme")
	n.Tenant(t, "globex")
	ctx := ctxFor(t)

	t.Run("splits at the server's limit of events", func(t *testing.T) {
		var calls countCalls
		c := n.Client(t, key, client.Config{DialOptions: []grpc.DialOption{calls.interceptor()}})
		evs := make([]client.Event, 250) // the server takes 100 per batch
		for i := range evs {
			evs[i] = client.Event{ID: fmt.Sprintf("big_%03d", i), Type: "order.paid", Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
		}
		res, err := c.PublishBatch(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Response.GetEventId() != evs[i].ID || r.Response.GetDuplicate() {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		if got := calls.publishBatch.Load(); got != 3 {
			t.Errorf("%d requests for 250 events, want 3", got)
		}
	})
	t.Run("splits at the byte limit", func(t *testing.T) {
		var calls countCalls
		c := n.Client(t, key, client.Config{MaxBatchBytes: 10 << 10, DialOptions: []grpc.DialOption{calls.interceptor()}})
		evs := make([]client.Event, 10)
		for i := range evs {
			evs[i] = client.Event{ID: fmt.Sprintf("bytes_%d", i), Type: "order.paid", Payload: fmt.Appendf(nil, `{"pad":%q}`, strings.Repeat("x", 4000))}
		}
		res, err := c.PublishBatch(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("result %d: %v", i, r.Err)
			}
		}
		if got := calls.publishBatch.Load(); got != 5 {
			t.Errorf("%d requests for 10 events of 4 KB under 10 KiB each, want 5", got)
		}
	})
	t.Run("each event succeeds or fails on its own", func(t *testing.T) {
		c := n.Client(t, key)
		res, err := c.PublishBatch(ctx, []client.Event{
			{ID: "mix_1", Type: "order.paid", Payload: []byte(`{}`)},
			{ID: "mix 2", Type: "order.paid", Payload: []byte(`{}`)},
			{ID: "big_000", Type: "order.paid", Payload: []byte(`{"n":0}`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || res[0].Response.GetDuplicate() {
			t.Errorf("good event: %+v", res[0])
		}
		if !errors.Is(res[1].Err, client.ErrInvalid) || res[1].Response != nil {
			t.Errorf("bad id: %+v, want ErrInvalid", res[1])
		}
		if res[2].Err != nil || !res[2].Response.GetDuplicate() {
			t.Errorf("an event of an earlier batch: %+v, want a duplicate", res[2])
		}
	})
	t.Run("one tenant per request", func(t *testing.T) {
		// The API's batch has one tenant; events naming another would be
		// published for the batch's tenant. The admin's mixed batch must
		// land each event in its own tenant.
		admin := n.Client(t, clienttest.AdminToken)
		var evs []client.Event
		for i := range 6 {
			tenant := []string{"acme", "globex"}[i%2]
			evs = append(evs, client.Event{TenantID: tenant, ID: fmt.Sprintf("tenant_%d", i), Type: "order.paid", Payload: []byte(`{}`)})
		}
		if _, err := admin.PublishBatch(ctx, evs); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ tenant, has, hasNot string }{
			{tenant: "acme", has: "tenant_0", hasNot: "tenant_1"},
			{tenant: "globex", has: "tenant_1", hasNot: "tenant_0"},
		} {
			found, missing, err := admin.LookupEvents(ctx, tc.tenant, []string{tc.has, tc.hasNot})
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 1 || found[0].GetEventId() != tc.has || len(missing) != 1 || missing[0] != tc.hasNot {
				t.Errorf("%s: found %v, missing %v", tc.tenant, found, missing)
			}
		}
	})
	t.Run("a request refused for its tenant does not stop the others", func(t *testing.T) {
		c := n.Client(t, key) // acme's key
		res, err := c.PublishBatch(ctx, []client.Event{
			{TenantID: "globex", ID: "not_mine", Type: "order.paid", Payload: []byte(`{}`)},
			{ID: "mine", Type: "order.paid", Payload: []byte(`{}`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, client.ErrPermissionDenied) || res[1].Err != nil || res[1].Response.GetEventId() != "mine" {
			t.Fatalf("results %+v", res)
		}
	})
	t.Run("a request failing as a whole", func(t *testing.T) {
		c := n.Client(t, "hk_unknown")
		res, err := c.PublishBatch(ctx, []client.Event{{ID: "x1", Type: "a.b", Payload: []byte(`{}`)}, {ID: "x2", Type: "a.b", Payload: []byte(`{}`)}})
		if !errors.Is(err, client.ErrUnauthenticated) {
			t.Fatalf("err %v, want ErrUnauthenticated", err)
		}
		for i, r := range res {
			if !errors.Is(r.Err, client.ErrUnauthenticated) {
				t.Errorf("result %d: %+v", i, r)
			}
		}
	})
}

func TestLookupEvents(t *testing.T) {
	n := clienttest.Start(t, clienttest.Options{})
	c := n.Client(t, n.Tenant(t, "acme"))
	ctx := ctxFor(t)
	payload := []byte(`{"order":"o_1"}`)
	if _, err := c.Publish(ctx, client.Event{ID: "ord_1", Type: "order.paid", Payload: payload}); err != nil {
		t.Fatal(err)
	}
	ids := []string{"ord_0"}
	for i := range 1500 { // more than one request holds
		ids = append(ids, fmt.Sprintf("never_%d", i))
	}
	ids = append(ids, "ord_1")
	found, missing, err := c.LookupEvents(ctx, "", ids)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	if len(found) != 1 || found[0].GetEventId() != "ord_1" || found[0].GetType() != "order.paid" || !bytes.Equal(found[0].GetPayloadSha256(), sum[:]) || found[0].GetAcceptedAt() == nil {
		t.Fatalf("found %v", found)
	}
	if len(missing) != 1501 || missing[0] != "ord_0" || missing[1500] != "never_1499" {
		t.Fatalf("missing: %d ids, first %q", len(missing), missing[0])
	}
	if _, _, err := c.LookupEvents(ctx, "", []string{"no spaces"}); !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), "event_ids[0]") {
		t.Fatalf("bad id: %v", err)
	}
}

func TestIterators(t *testing.T) {
	n := clienttest.Start(t, clienttest.Options{})
	c := n.Client(t, n.Tenant(t, "acme"))
	ctx := ctxFor(t)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer rcv.Close()
	for i := range 5 {
		if _, err := c.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{EndpointId: fmt.Sprintf("ep_%d", i), Settings: &controlv1.EndpointSettings{Url: rcv.URL, EventTypes: []string{"order.paid"}}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("endpoints", func(t *testing.T) {
		seen := map[string]bool{}
		for e, err := range c.Endpoints(ctx, &controlv1.ListEndpointsRequest{PageSize: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			seen[e.GetEndpointId()] = true
		}
		if len(seen) != 5 {
			t.Fatalf("iterated over %d endpoints, want 5: %v", len(seen), seen)
		}
	})
	t.Run("deliveries over cursors", func(t *testing.T) {
		for i := range 3 {
			if _, err := c.Publish(ctx, client.Event{ID: fmt.Sprintf("o_%d", i), Type: "order.paid", Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		// 3 events × 5 endpoints; history is a projection: wait for it.
		deadline := time.Now().Add(30 * time.Second)
		for {
			seen := map[string]bool{}
			var err error
			for d, e := range c.Deliveries(ctx, &controlv1.ListDeliveriesRequest{PageSize: 4}) {
				if err = e; err != nil {
					break
				}
				if seen[d.GetDeliveryId()] {
					t.Fatalf("delivery %s twice", d.GetDeliveryId())
				}
				seen[d.GetDeliveryId()] = true
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) == 15 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("iterated over %d deliveries, want 15", len(seen))
			}
			time.Sleep(50 * time.Millisecond) // a poll interval, not a wait for an event
		}
		// Breaking out of the loop stops the iteration.
		count := 0
		for range c.Deliveries(ctx, &controlv1.ListDeliveriesRequest{PageSize: 2}) {
			count++
			if count == 3 {
				break
			}
		}
		if count != 3 {
			t.Fatalf("counted %d", count)
		}
	})
	t.Run("an error ends the iteration", func(t *testing.T) {
		var errs int
		for _, err := range n.Client(t, "hk_unknown").Deliveries(ctx, nil) {
			if !errors.Is(err, client.ErrUnauthenticated) {
				t.Fatalf("err %v", err)
			}
			errs++
		}
		if errs != 1 {
			t.Fatalf("%d errors yielded, want 1", errs)
		}
	})
}

// TestManagement walks the operator's calls once each.
func TestManagement(t *testing.T) {
	n := clienttest.Start(t, clienttest.Options{})
	admin := n.Client(t, clienttest.AdminToken)
	ctx := ctxFor(t)
	if _, err := admin.CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	key, err := admin.IssueAPIKey(ctx, &controlv1.IssueApiKeyRequest{TenantId: "acme", Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetQuota(ctx, &controlv1.SetQuotaRequest{TenantId: "acme", Quota: &hooklinev1.Quota{Weight: 2}}); err != nil {
		t.Fatal(err)
	}
	acme := n.Client(t, key.GetApiKey())
	tenant, err := acme.GetTenant(ctx, &controlv1.GetTenantRequest{})
	if err != nil || tenant.GetTenantId() != "acme" || tenant.GetQuota().GetWeight() != 2 {
		t.Fatalf("get tenant: %v %v", tenant, err)
	}
	created, err := acme.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{EndpointId: "ep_1", Settings: &controlv1.EndpointSettings{Url: "http://127.0.0.1:9/in", EventTypes: []string{"a.b"}}})
	if err != nil || !strings.HasPrefix(created.GetSecret(), "whsec_") {
		t.Fatalf("create endpoint: %v %v", created, err)
	}
	id := created.GetEndpoint().GetEndpointId()
	steps := []struct {
		name string
		do   func() (*controlv1.Endpoint, error)
		want func(*controlv1.Endpoint) bool
	}{
		{name: "update", do: func() (*controlv1.Endpoint, error) {
			return acme.UpdateEndpoint(ctx, &controlv1.UpdateEndpointRequest{EndpointId: id, Settings: &controlv1.EndpointSettings{Description: "d"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
		}, want: func(e *controlv1.Endpoint) bool {
			return e.GetConfigVersion() == 2 && e.GetSettings().GetDescription() == "d"
		}},
		{name: "pause", do: func() (*controlv1.Endpoint, error) {
			return acme.PauseEndpoint(ctx, &controlv1.PauseEndpointRequest{EndpointId: id})
		}, want: func(e *controlv1.Endpoint) bool { return e.GetStatus() == controlv1.Endpoint_STATUS_PAUSED }},
		{name: "resume", do: func() (*controlv1.Endpoint, error) {
			return acme.ResumeEndpoint(ctx, &controlv1.ResumeEndpointRequest{EndpointId: id})
		}, want: func(e *controlv1.Endpoint) bool { return e.GetStatus() == controlv1.Endpoint_STATUS_ACTIVE }},
		{name: "rotate", do: func() (*controlv1.Endpoint, error) {
			r, err := acme.RotateSecret(ctx, &controlv1.RotateSecretRequest{EndpointId: id})
			return r.GetEndpoint(), err
		}, want: func(e *controlv1.Endpoint) bool { return len(e.GetSecrets()) == 2 }},
		{name: "retire", do: func() (*controlv1.Endpoint, error) {
			return acme.RetireSecret(ctx, &controlv1.RetireSecretRequest{EndpointId: id, Version: 1})
		}, want: func(e *controlv1.Endpoint) bool { return len(e.GetSecrets()) == 1 }},
		{name: "delete", do: func() (*controlv1.Endpoint, error) {
			return acme.DeleteEndpoint(ctx, &controlv1.DeleteEndpointRequest{EndpointId: id})
		}, want: func(e *controlv1.Endpoint) bool { return e.GetStatus() == controlv1.Endpoint_STATUS_DELETED }},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			e, err := s.do()
			if err != nil || !s.want(e) {
				t.Fatalf("%v %v", e, err)
			}
		})
	}
	t.Run("revoke key", func(t *testing.T) {
		if _, err := admin.RevokeAPIKey(ctx, &controlv1.RevokeApiKeyRequest{TenantId: "acme", KeyId: key.GetKeyId()}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := acme.GetTenant(ctx, &controlv1.GetTenantRequest{})
			if errors.Is(err, client.ErrUnauthenticated) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revoked key still works: %v", err)
			}
			time.Sleep(50 * time.Millisecond) // a poll interval, not a wait for an event
		}
	})
}
