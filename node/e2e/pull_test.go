package e2e_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// consumer pulls a pull endpoint's deliveries and checks each message's
// signature with the independent Standard Webhooks library.
type consumer struct {
	t    *testing.T
	c    *tenantClient
	ep   string
	wh   *standardwebhooks.Webhook
	seen map[string]int // delivery id -> times offered
}

// pull leases up to 10 deliveries for a second, waiting up to a second.
func (k *consumer) pull() []*controlv1.PulledMessage {
	k.t.Helper()
	res, err := k.c.endpoints.PullDeliveries(k.c.ctx(), &controlv1.PullDeliveriesRequest{EndpointId: k.ep, Max: 10, LeaseSeconds: 1, WaitSeconds: 1})
	if err != nil {
		k.t.Fatalf("pull: %v", err)
	}
	for _, m := range res.GetMessages() {
		h := http.Header{}
		for name, v := range m.GetHeaders() {
			h.Set(name, v)
		}
		if err := k.wh.Verify(m.GetBody(), h); err != nil {
			k.t.Errorf("delivery %s: signature: %v", m.GetDeliveryId(), err)
		}
		if h.Get("webhook-id") != m.GetDeliveryId() {
			k.t.Errorf("delivery %s carries webhook-id %q", m.GetDeliveryId(), h.Get("webhook-id"))
		}
		k.seen[m.GetDeliveryId()]++
	}
	return res.GetMessages()
}

func (k *consumer) ack(msgs []*controlv1.PulledMessage) *controlv1.AckDeliveriesResponse {
	k.t.Helper()
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.GetDeliveryId())
	}
	res, err := k.c.endpoints.AckDeliveries(k.c.ctx(), &controlv1.AckDeliveriesRequest{EndpointId: k.ep, DeliveryIds: ids})
	if err != nil {
		k.t.Fatalf("ack: %v", err)
	}
	return res
}

// TestPullDelivery: a pull endpoint's consumer, which crashes without
// acknowledging one batch in five, gets every delivery acknowledged once
// in the end (the unacknowledged leases end as failed attempts and are
// offered again), each message signed as a push would be; a seek offers
// again exactly the deliveries planned since the time asked for.
func TestPullDelivery(t *testing.T) {
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 100 * time.Millisecond, Cap: 300 * time.Millisecond}})
	c := n.tenant(t, "acme", nil)
	if _, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_bad",
		Settings: &controlv1.EndpointSettings{Url: "http://127.0.0.1:9/in", EventTypes: []string{"*"}, Delivery: "pull"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a pull endpoint with a url: %v, want INVALID_ARGUMENT", err)
	}
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_pull",
		Settings: &controlv1.EndpointSettings{EventTypes: []string{"order.updated"}, Delivery: "pull"}})
	if err != nil {
		t.Fatalf("create a pull endpoint: %v", err)
	}
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	ep := created.GetEndpoint().GetEndpointId()
	if got := created.GetEndpoint().GetSettings().GetDelivery(); got != "pull" {
		t.Errorf("settings.delivery = %q, want pull", got)
	}
	k := &consumer{t: t, c: c, ep: ep, wh: wh, seen: map[string]int{}}

	var before, after []string
	for i := range 20 {
		c.mu.Lock()
		c.ids["ep_pull"], c.names[ep] = ep, "ep_pull"
		c.mu.Unlock()
		ids := c.publish(t, fmt.Sprintf("ev_%02d", i), "order.updated")
		before = append(before, ids...)
	}
	seekFrom := time.Now()
	for i := 20; i < 40; i++ {
		after = append(after, c.publish(t, fmt.Sprintf("ev_%02d", i), "order.updated")...)
	}
	all := append(slices.Clone(before), after...)

	acked := map[string]int{}
	deadline := time.Now().Add(60 * time.Second)
	for batches := 0; len(acked) < len(all); {
		if time.Now().After(deadline) {
			t.Fatalf("acknowledged %d of %d deliveries within 60 s", len(acked), len(all))
		}
		msgs := k.pull()
		if len(msgs) == 0 {
			continue
		}
		if batches++; batches%5 == 2 {
			continue // a consumer that crashed before acknowledging
		}
		res := k.ack(msgs)
		if int(res.GetAcked())+len(res.GetNotAcked()) != len(msgs) || len(res.GetNotAcked()) != 0 {
			t.Errorf("ack of %d leased deliveries: acked %d, not acked %v", len(msgs), res.GetAcked(), res.GetNotAcked())
		}
		for _, m := range msgs {
			acked[m.GetDeliveryId()]++
		}
	}
	for _, id := range all {
		if acked[id] != 1 {
			t.Errorf("delivery %s acknowledged %d times, want once", id, acked[id])
		}
	}
	offeredAgain := 0
	for _, n := range k.seen {
		if n > 1 {
			offeredAgain++
		}
	}
	if offeredAgain == 0 {
		t.Errorf("no delivery was offered again, though one batch in five was not acknowledged")
	}
	for _, id := range all {
		d := c.waitDelivery(t, id, "succeeded", hasStatus("succeeded"))
		if a := d.GetAttempts(); len(a) == 0 || !a[len(a)-1].GetPulled() {
			t.Errorf("delivery %s: last attempt %v, want one marked pulled", id, a)
		}
	}
	if res := k.ack([]*controlv1.PulledMessage{{DeliveryId: all[0]}}); res.GetAcked() != 0 || len(res.GetNotAcked()) != 1 {
		t.Errorf("an acknowledgement again: %v, want it not acked", res)
	}

	// Seek: exactly the deliveries planned since then come back.
	if _, err := c.endpoints.SeekDeliveries(c.ctx(), &controlv1.SeekDeliveriesRequest{EndpointId: ep, Since: timestamppb.New(seekFrom)}); err != nil {
		t.Fatalf("seek: %v", err)
	}
	again := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(again) < len(after); {
		if time.Now().After(deadline) {
			t.Fatalf("seek offered %d of the %d deliveries planned since then within 30 s", len(again), len(after))
		}
		msgs := k.pull()
		for _, m := range msgs {
			again[m.GetDeliveryId()] = true
		}
		k.ack(msgs)
	}
	if msgs := k.pull(); len(msgs) != 0 {
		t.Errorf("after the seek's window, %d more deliveries were offered", len(msgs))
	}
	for _, id := range before {
		if again[id] {
			t.Errorf("seek offered %s, planned before the time asked for", id)
		}
	}
}

// TestPullOrdered: on a pull endpoint ordered by key, a key's next
// delivery is offered only once its previous one is acknowledged.
func TestPullOrdered(t *testing.T) {
	n := startE2E(t, node.Config{})
	c := n.tenant(t, "acme", nil)
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_pull",
		Settings: &controlv1.EndpointSettings{EventTypes: []string{"order.updated"}, Delivery: "pull", Ordering: "key"}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	k := &consumer{t: t, c: c, ep: created.GetEndpoint().GetEndpointId(), wh: wh, seen: map[string]int{}}
	for i := 1; i <= 3; i++ {
		c.publishKeyed(t, fmt.Sprintf("ev_k_%d", i), "order.updated", "k")
	}
	for want := 1; want <= 3; want++ {
		var msgs []*controlv1.PulledMessage
		for deadline := time.Now().Add(10 * time.Second); len(msgs) == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("sequence %d was not offered within 10 s", want)
			}
			msgs = k.pull()
		}
		if len(msgs) != 1 || msgs[0].GetHeaders()["webhook-sequence"] != fmt.Sprint(want) || msgs[0].GetEventId() != fmt.Sprintf("ev_k_%d", want) {
			t.Fatalf("pull %d offered %v, want ev_k_%d alone, sequence %d", want, msgs, want, want)
		}
		k.ack(msgs)
	}
}

// TestPullToken: a pull token pulls and acknowledges its one endpoint's
// deliveries and can do nothing else: not another endpoint, not a list,
// not a delivery's history. It is issued only for a pull endpoint, and
// without capabilities.
func TestPullToken(t *testing.T) {
	n := startE2E(t, node.Config{})
	c := n.tenant(t, "acme", nil)
	mk := func(name string) string {
		res, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: name,
			Settings: &controlv1.EndpointSettings{EventTypes: []string{"order.updated"}, Delivery: "pull"}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return res.GetEndpoint().GetEndpointId()
	}
	mine, other := mk("ep_mine"), mk("ep_other")
	portals := controlv1.NewPortalServiceClient(n.cc)
	if _, err := portals.IssuePortalToken(c.ctx(), &controlv1.IssuePortalTokenRequest{EndpointId: mine, Capabilities: []string{"replay"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a pull token with capabilities: %v, want INVALID_ARGUMENT", err)
	}
	issued, err := portals.IssuePortalToken(c.ctx(), &controlv1.IssuePortalTokenRequest{EndpointId: mine, Label: "consumer"})
	if err != nil {
		t.Fatalf("issue a pull token: %v", err)
	}
	if issued.GetToken().GetEndpointId() != mine || len(issued.GetToken().GetCapabilities()) != 0 {
		t.Errorf("pull token view: %v", issued.GetToken())
	}
	c.publish(t, "ev_1", "order.updated")
	as := bearer(t, issued.GetPortalToken())
	var msgs []*controlv1.PulledMessage
	for deadline := time.Now().Add(10 * time.Second); len(msgs) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the pull token got nothing within 10 s")
		}
		res, err := c.endpoints.PullDeliveries(as, &controlv1.PullDeliveriesRequest{EndpointId: mine, WaitSeconds: 1})
		if err != nil {
			t.Fatalf("pull with the pull token: %v", err)
		}
		msgs = res.GetMessages()
	}
	if res, err := c.endpoints.AckDeliveries(as, &controlv1.AckDeliveriesRequest{EndpointId: mine, DeliveryIds: []string{msgs[0].GetDeliveryId()}}); err != nil || res.GetAcked() != 1 {
		t.Errorf("ack with the pull token: %v, %v", res, err)
	}
	for what, call := range map[string]func() error{
		"pull another endpoint": func() error {
			_, err := c.endpoints.PullDeliveries(as, &controlv1.PullDeliveriesRequest{EndpointId: other})
			return err
		},
		"list endpoints": func() error {
			_, err := c.endpoints.ListEndpoints(as, &controlv1.ListEndpointsRequest{})
			return err
		},
		"read a delivery": func() error {
			_, err := c.deliveries.GetDelivery(as, &controlv1.GetDeliveryRequest{DeliveryId: msgs[0].GetDeliveryId()})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s with the pull token: %v, want PERMISSION_DENIED", what, err)
		}
	}
}
