package e2e_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestEndpointAsOf changes an endpoint three times (its URL and types;
// its filter and rate, then a pause; a rotation of its secret) and reads
// it as of each moment, by time and by log position, over gRPC and REST:
// each read shows that moment's configuration, status and live secret
// versions, never a secret. The tenant's quota reads the same way.
func TestEndpointAsOf(t *testing.T) {
	n := startE2E(t, node.Config{})
	rc := newHookReceiver(t, nil)
	c := n.tenant(t, "acme", &hooklinev1.Quota{AttemptsPerSecond: 10})
	before := time.Now()
	c.endpoint(t, rc, "ep", []string{"a"}, nil, answer(http.StatusOK))
	id := c.ids["ep"]
	moment := func() string {
		// Every append so far was recorded before now.
		t.Helper()
		return time.Now().UTC().Format(time.RFC3339Nano)
	}
	update := func(s *controlv1.EndpointSettings, paths ...string) {
		t.Helper()
		if _, err := c.endpoints.UpdateEndpoint(c.ctx(), &controlv1.UpdateEndpointRequest{EndpointId: id, Settings: s, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}); err != nil {
			t.Fatal(err)
		}
	}
	lastPosition := func() string {
		t.Helper()
		recs, err := n.srv.Log().ReadStream(t.Context(), events.EndpointStream(id), events.Backwards, events.End, 1)
		if err != nil || len(recs) != 1 {
			t.Fatalf("read the endpoint's stream: %v", err)
		}
		return recs[0].Position.String()
	}

	t1 := moment()
	update(&controlv1.EndpointSettings{Url: rc.url("/ep2"), EventTypes: []string{"a", "b"}}, "url", "event_types")
	t2 := moment()
	update(&controlv1.EndpointSettings{Filter: "data.amount > 10", RatePerSecond: 5}, "filter", "rate_per_second")
	if _, err := c.endpoints.PauseEndpoint(c.ctx(), &controlv1.PauseEndpointRequest{EndpointId: id}); err != nil {
		t.Fatal(err)
	}
	t3 := moment()
	if _, err := c.endpoints.RotateSecret(c.ctx(), &controlv1.RotateSecretRequest{EndpointId: id}); err != nil {
		t.Fatal(err)
	}
	p4 := lastPosition()
	if _, err := c.endpoints.ResumeEndpoint(c.ctx(), &controlv1.ResumeEndpointRequest{EndpointId: id}); err != nil {
		t.Fatal(err)
	}
	update(&controlv1.EndpointSettings{EventTypes: []string{"c"}}, "event_types")

	type want struct {
		version  int64
		url      string
		types    []string
		filter   string
		rate     float64
		status   controlv1.Endpoint_Status
		secrets  []int32
		atLeastN int64
	}
	cases := []struct {
		name, asOf string
		want       want
	}{
		{"created", t1, want{1, rc.url("/ep"), []string{"a"}, "", 0, controlv1.Endpoint_STATUS_ACTIVE, []int32{1}, 1}},
		{"first change", t2, want{2, rc.url("/ep2"), []string{"a", "b"}, "", 0, controlv1.Endpoint_STATUS_ACTIVE, []int32{1}, 2}},
		{"second change and a pause", t3, want{3, rc.url("/ep2"), []string{"a", "b"}, "data.amount > 10", 5, controlv1.Endpoint_STATUS_PAUSED, []int32{1}, 4}},
		{"a rotation, by position", p4, want{3, rc.url("/ep2"), []string{"a", "b"}, "data.amount > 10", 5, controlv1.Endpoint_STATUS_PAUSED, []int32{2, 1}, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := c.endpoints.GetEndpoint(c.ctx(), &controlv1.GetEndpointRequest{EndpointId: id, AsOf: tc.asOf})
			if err != nil {
				t.Fatal(err)
			}
			s := e.GetSettings()
			var secrets []int32
			for _, sec := range e.GetSecrets() {
				secrets = append(secrets, sec.GetVersion())
			}
			got := want{e.GetConfigVersion(), s.GetUrl(), s.GetEventTypes(), s.GetFilter(), s.GetRatePerSecond(), e.GetStatus(), secrets, e.GetAsOf().GetEvents()}
			if got.version != tc.want.version || got.url != tc.want.url || !slices.Equal(got.types, tc.want.types) || got.filter != tc.want.filter ||
				got.rate != tc.want.rate || got.status != tc.want.status || !slices.Equal(got.secrets, tc.want.secrets) || got.atLeastN != tc.want.atLeastN {
				t.Errorf("as of %s:\n got %+v\nwant %+v", tc.asOf, got, tc.want)
			}
			if e.GetAsOf().GetPosition() == "" {
				t.Error("as_of has no position")
			}
		})
	}

	t.Run("today differs", func(t *testing.T) {
		e, err := c.endpoints.GetEndpoint(c.ctx(), &controlv1.GetEndpointRequest{EndpointId: id})
		if err != nil {
			t.Fatal(err)
		}
		if e.GetConfigVersion() != 4 || e.GetStatus() != controlv1.Endpoint_STATUS_ACTIVE || e.GetAsOf() != nil {
			t.Errorf("now: v%d %v as_of %v; want v4, active, no as_of", e.GetConfigVersion(), e.GetStatus(), e.GetAsOf())
		}
	})

	t.Run("over REST", func(t *testing.T) {
		r := n.restGet(t, c.key, "/v1/webhook-endpoints/"+id+"?as_of="+url.QueryEscape(t2))
		if r["config_version"] != "2" {
			t.Errorf("REST as of t2: config_version %v; want \"2\" (%v)", r["config_version"], r)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		_, err := c.endpoints.GetEndpoint(c.ctx(), &controlv1.GetEndpointRequest{EndpointId: id, AsOf: before.Add(-time.Second).Format(time.RFC3339Nano)})
		if status.Code(err) != codes.NotFound {
			t.Errorf("before its creation: %v; want NOT_FOUND", err)
		}
		_, err = c.endpoints.GetEndpoint(c.ctx(), &controlv1.GetEndpointRequest{EndpointId: id, AsOf: "last tuesday"})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("a bad as_of: %v; want INVALID_ARGUMENT", err)
		}
		other := n.tenant(t, "other", nil)
		_, err = other.endpoints.GetEndpoint(other.ctx(), &controlv1.GetEndpointRequest{EndpointId: id, AsOf: t2})
		if status.Code(err) != codes.NotFound {
			t.Errorf("another tenant's endpoint: %v; want NOT_FOUND", err)
		}
	})

	t.Run("the tenant's quota", func(t *testing.T) {
		adm := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e2eAdmin)
		tenants := controlv1.NewTenantServiceClient(n.cc)
		q1 := moment()
		if _, err := tenants.SetQuota(adm, &controlv1.SetQuotaRequest{TenantId: "acme", Quota: &hooklinev1.Quota{AttemptsPerSecond: 50, MaxInFlight: 7}}); err != nil {
			t.Fatal(err)
		}
		q2 := moment()
		for asOf, want := range map[string]float64{q1: 10, q2: 50} {
			tn, err := tenants.GetTenant(adm, &controlv1.GetTenantRequest{TenantId: "acme", AsOf: asOf})
			if err != nil {
				t.Fatal(err)
			}
			if tn.GetQuota().GetAttemptsPerSecond() != want || tn.GetAsOf() == nil {
				t.Errorf("quota as of %s: %v (as_of %v); want %g attempts/s", asOf, tn.GetQuota(), tn.GetAsOf(), want)
			}
		}
	})
}
