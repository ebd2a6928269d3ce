package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// switchReceiver answers 400 (a permanent failure: the delivery ends
// failed at once) until it is switched, then 204; it verifies every
// signature with the Standard Webhooks library and counts the successful
// requests per webhook-id.
type switchReceiver struct {
	mu      sync.Mutex // guards the fields below
	wh      *standardwebhooks.Webhook
	ok      bool
	got     map[string]int // webhook-id -> requests answered 204
	badSigs int
}

func (r *switchReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wh == nil || r.wh.Verify(body, req.Header) != nil {
		r.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if !r.ok {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.got[req.Header.Get("webhook-id")]++
	w.WriteHeader(http.StatusNoContent)
}

func (r *switchReceiver) succeeded() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.got))
	for id, n := range r.got {
		out[id] = n
	}
	return out
}

// TestWindowReplayKilled: a window recovery (planned times, event types,
// failed) answers its manifest with a dry run (count, digest, time under
// the rate limit) that matches the deliveries the test computes itself;
// a wrong digest is refused naming the field; run with the dry run's
// digest, it replays exactly that list with the original webhook-ids; the
// node is killed (SIGKILL) while it runs (its second page not all
// requested: a page is 100), and the restarted node reads the list back
// and finishes it, each delivery requested once.
func TestWindowReplayKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const (
		inWindow = 150 // more than a page (100)
		rate     = 50  // per second: the replays take 3 s
	)
	rcv := &switchReceiver{got: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	data := t.TempDir()
	n := startNode(t, data)
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	key := must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})).GetApiKey()
	api := n.as(t, key)
	created := must(api.endpoints().CreateEndpoint(api.ctx(), &controlv1.CreateEndpointRequest{
		EndpointId: "ep_win",
		Settings: &controlv1.EndpointSettings{
			Url: srv.URL + "/in", EventTypes: []string{"order.paid", "order.refunded"}, RatePerSecond: rate, Burst: 1, MaxInFlight: 2,
		},
	}))
	epID := created.GetEndpoint().GetEndpointId()
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.wh = wh
	rcv.mu.Unlock()

	publish := func(prefix string, count int, typ string) []string {
		var ids []string
		for i := range count {
			res := must(api.events().Publish(api.ctx(), &controlv1.PublishRequest{
				EventId: fmt.Sprintf("%s_%02d", prefix, i), Type: typ, Payload: fmt.Appendf(nil, `{"n":%d}`, i),
			}))
			for _, d := range res.GetDeliveries() {
				ids = append(ids, d.GetDeliveryId())
			}
		}
		return ids
	}
	// The window holds the order.paid of "in"; the refunds in it, and
	// the events before and after it, are not replayed.
	early := publish("early", 3, "order.paid")
	since := time.Now()
	in := publish("in", inWindow, "order.paid")
	refunds := publish("refund", 3, "order.refunded")
	until := time.Now()
	late := publish("late", 3, "order.paid")
	all := slices.Concat(early, in, refunds, late)
	deliveries := api.deliveriesClient()
	failed := waitFor(t, func() ([]*controlv1.Delivery, bool) {
		var out []*controlv1.Delivery
		for cursor := ""; ; {
			page, err := deliveries.ListDeliveries(api.ctx(), &controlv1.ListDeliveriesRequest{Status: "failed", PageSize: 100, Cursor: cursor})
			if err != nil {
				return nil, false
			}
			out = append(out, page.GetDeliveries()...)
			if cursor = page.GetNextCursor(); cursor == "" {
				return out, len(out) == len(all)
			}
		}
	})

	// The list the dry run must describe, computed here: the window's
	// order.paid deliveries by planned time, then id.
	slices.SortFunc(failed, func(a, b *controlv1.Delivery) int {
		if c := a.GetPlannedAt().AsTime().Compare(b.GetPlannedAt().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(a.GetDeliveryId(), b.GetDeliveryId())
	})
	var want []string
	for _, d := range failed {
		if slices.Contains(in, d.GetDeliveryId()) {
			want = append(want, d.GetDeliveryId())
		}
	}
	sum := sha256.New()
	for _, id := range want {
		fmt.Fprintf(sum, "%s\n", id)
	}
	wantDigest := hex.EncodeToString(sum.Sum(nil))

	window := func() *controlv1.RecoverEndpointRequest {
		return &controlv1.RecoverEndpointRequest{
			EndpointId: epID, Since: timestamppb.New(since), Until: timestamppb.New(until), EventTypes: []string{"order.paid"},
		}
	}
	var dry *controlv1.Recovery
	t.Run("dry run", func(t *testing.T) {
		req := window()
		req.DryRun = true
		dry = must(api.endpoints().RecoverEndpoint(api.ctx(), req))
		m := dry.GetManifest()
		if !dry.GetDryRun() || dry.GetRecoveryId() != "" || m.GetDeliveries() != inWindow || m.GetDigest() != wantDigest ||
			!slices.Equal(m.GetDeliveryIds(), want[:20]) || m.GetRatePerSecond() != rate || m.GetBurst() != 1 ||
			m.GetEstimatedSeconds() != float64(inWindow-1)/rate {
			t.Fatalf("dry run: %v\nwant %d deliveries, digest %s, ids %v", dry, len(want), wantDigest, want)
		}
		if got := must(api.endpoints().ListRecoveries(api.ctx(), &controlv1.ListRecoveriesRequest{EndpointId: epID})); len(got.GetRecoveries()) != 0 {
			t.Fatalf("a dry run started a recovery: %v", got)
		}
	})

	t.Run("a digest that no longer matches is refused", func(t *testing.T) {
		// Without its event-type filter the window lists the refunds too:
		// the dry run's digest does not describe that list.
		req := window()
		req.Statuses = []string{"failed", "succeeded"}
		req.EventTypes = nil
		req.Digest = wantDigest
		_, err := api.endpoints().RecoverEndpoint(api.ctx(), req)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "digest") {
			t.Fatalf("a mismatched digest: %v", err)
		}
	})

	rcv.mu.Lock()
	rcv.ok = true
	rcv.mu.Unlock()
	req := window()
	req.Digest = dry.GetManifest().GetDigest()
	started := must(api.endpoints().RecoverEndpoint(api.ctx(), req))
	rid := started.GetRecoveryId()
	if rid == "" || started.GetManifest().GetDigest() != wantDigest || started.GetManifest().GetDeliveries() != inWindow {
		t.Fatalf("started: %v", started)
	}

	// Kill the node while the recovery runs.
	waitFor(t, func() (int, bool) { n := len(rcv.succeeded()); return n, n >= 40 })
	n.kill(t)
	before := len(rcv.succeeded())
	if before >= len(want) {
		t.Fatalf("the recovery finished before the kill (%d of %d replayed): nothing to resume", before, len(want))
	}
	t.Logf("killed with %d of %d replayed", before, len(want))

	// Restarted, the node resumes the recovery on its own, from its list.
	n = startNode(t, data)
	got := waitForLong(t, 60*time.Second, func() (map[string]int, bool) { g := rcv.succeeded(); return g, len(g) >= len(want) })
	if !regexp.MustCompile(`msg="recovery resumed" .*recovery_id=` + rid + ` next=[1-9]`).MatchString(n.output()) {
		t.Errorf("the restarted node did not resume the recovery from its list:\n%s", n.output())
	}
	api = n.as(t, key)
	rec := waitFor(t, func() (*controlv1.Recovery, bool) {
		r, err := api.endpoints().GetRecovery(api.ctx(), &controlv1.GetRecoveryRequest{EndpointId: epID, RecoveryId: rid})
		return r, err == nil && r.GetDone()
	})
	if rec.GetState() != "done" || rec.GetFound() != inWindow || rec.GetRequested() != inWindow || rec.GetManifest().GetDigest() != wantDigest ||
		!slices.Equal(rec.GetEventTypes(), []string{"order.paid"}) || !slices.Equal(rec.GetStatuses(), []string{"failed"}) {
		t.Fatalf("recovery after the restart: %v", rec)
	}
	n.stop(t)

	// Exactly the listed deliveries were replayed, with their own
	// webhook-ids. A request the kill cut between the receiver's answer
	// and its record may be sent again (at least once): at most the two in
	// flight; any other twice is a fault.
	var replayed, twice []string
	for id, c := range got {
		replayed = append(replayed, id)
		if c > 1 {
			twice = append(twice, id)
		}
	}
	slices.Sort(replayed)
	wantSorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(replayed, wantSorted) {
		t.Fatalf("replayed %v\nwant     %v", replayed, wantSorted)
	}
	if len(twice) > 2 {
		t.Fatalf("delivered twice: %v", twice)
	}
	rcv.mu.Lock()
	bad := rcv.badSigs
	rcv.mu.Unlock()
	if bad != 0 {
		t.Fatalf("%d requests failed verification", bad)
	}

	// The log is the audit: the list recorded on the recovery's stream,
	// one ReplayRequested of the recovery per delivery, and its start,
	// progress and end on the endpoint's stream.
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(data, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	recs, err := l.ReadStream(ctx, events.RecoveryStream(rid), events.Forwards, 0, 100)
	if err != nil || len(recs) != 1 {
		t.Fatalf("recovery stream: %d records, %v", len(recs), err)
	}
	if listed := decode[*hooklinev1.RecoveryListed](t, recs[0]); !slices.Equal(listed.GetDeliveryIds(), want) {
		t.Fatalf("recorded list %v", listed.GetDeliveryIds())
	}
	for _, id := range want {
		recs, err := l.ReadStream(ctx, events.DeliveryStream(id), events.Forwards, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		requested := 0
		for _, r := range recs {
			if r.Type == "ReplayRequested" && decode[*hooklinev1.ReplayRequested](t, r).GetRecoveryId() == rid {
				requested++
			}
		}
		if requested != 1 {
			t.Errorf("%s: %d ReplayRequested of the recovery", id, requested)
		}
	}
	recs, err = l.ReadStream(ctx, events.EndpointStream(epID), events.Forwards, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		if strings.HasPrefix(r.Type, "Recovery") {
			kinds = append(kinds, r.Type)
		}
	}
	if len(kinds) < 3 || kinds[0] != "RecoveryStarted" || kinds[len(kinds)-1] != "RecoveryFinished" || !slices.Contains(kinds, "RecoveryProgressed") {
		t.Fatalf("endpoint stream: %v", kinds)
	}
}

// decode returns the message a record holds, as T.
func decode[T any](t *testing.T, r events.Record) T {
	t.Helper()
	msg, err := events.Decode(&r)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := msg.(T)
	if !ok {
		t.Fatalf("%s@%d is %T", r.Stream, r.Revision, msg)
	}
	return m
}
