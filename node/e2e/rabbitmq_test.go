package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/internal/brokers"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// rabbitQueue consumes a durable queue bound to a direct exchange,
// counting messages by message-id and verifying each as a webhook; it
// reconnects when the broker comes back.
type rabbitQueue struct {
	t      *testing.T
	url    string
	wh     *standardwebhooks.Webhook
	mu     sync.Mutex
	counts map[string]int
	stop   chan struct{}
	done   chan struct{}
}

// declareRabbit declares exchange "hooks" (direct, durable) and queue
// "orders" (durable) bound to it with routing key "orders".
func declareRabbit(t *testing.T, url string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("hooks", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("orders", "orders", "hooks", false, nil); err != nil {
		t.Fatal(err)
	}
}

func consumeRabbit(t *testing.T, url string, wh *standardwebhooks.Webhook) *rabbitQueue {
	q := &rabbitQueue{t: t, url: url, wh: wh, counts: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	t.Cleanup(func() { close(q.stop); <-q.done })
	return q
}

func (q *rabbitQueue) run() {
	defer close(q.done)
	for {
		q.consume()
		select {
		case <-q.stop:
			return
		case <-time.After(100 * time.Millisecond): // the broker is down: try again
		}
	}
}

// consume reads the queue until the connection drops or the test ends.
func (q *rabbitQueue) consume() {
	conn, err := amqp.Dial(q.url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	msgs, err := ch.Consume("orders", "", false, false, false, false, nil)
	if err != nil {
		return
	}
	for {
		select {
		case <-q.stop:
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			h := http.Header{}
			for k, v := range m.Headers {
				if s, ok := v.(string); ok {
					h.Set(k, s)
				}
			}
			if err := q.wh.Verify(m.Body, h); err != nil {
				q.t.Errorf("message %s does not verify: %v", m.MessageId, err)
			}
			if h.Get("webhook-id") != m.MessageId {
				q.t.Errorf("message-id %q, webhook-id %q: want the delivery id in both", m.MessageId, h.Get("webhook-id"))
			}
			q.mu.Lock()
			q.counts[m.MessageId]++
			q.mu.Unlock()
			_ = m.Ack(false)
		}
	}
}

// has reports whether every id arrived at least once.
func (q *rabbitQueue) has(ids []string) func() bool {
	return func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, id := range ids {
			if q.counts[id] == 0 {
				return false
			}
		}
		return true
	}
}

// TestRabbitMQDestination delivers through a node to a RabbitMQ exchange
// with credentials in the URL: every delivery reaches the bound queue,
// persistent, with the delivery id as message-id and the signature headers
// as message headers; the password is sealed and never shown; a routing
// key no queue takes, and a wrong password, fail with an error that says
// so; with the broker down until the endpoint's circuit opens, deliveries
// retry and succeed once it is back.
func TestRabbitMQDestination(t *testing.T) {
	rs := startBroker(t, brokers.RabbitMQ)
	declareRabbit(t, rs.URL())
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 200 * time.Millisecond, Cap: time.Second, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)

	base := "amqp://" + rs.User + ":" + rs.Password + "@" + rs.Addr()
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_rabbit", Settings: &controlv1.EndpointSettings{
		Url: base + "/?exchange=hooks&routing_key=orders", EventTypes: []string{"order.paid"}, RatePerSecond: 1000, Burst: 100, MaxInFlight: 20,
	}})
	if err != nil {
		t.Fatalf("create the endpoint: %v", err)
	}
	s := created.GetEndpoint().GetSettings()
	if strings.Contains(s.GetUrl(), rs.Password) || !strings.HasPrefix(s.GetUrl(), "amqp://"+rs.User+"@") || !s.GetUrlPasswordSet() {
		t.Fatalf("the endpoint shows url %q, url_password_set %v: want the user without the password, and the password set", s.GetUrl(), s.GetUrlPasswordSet())
	}
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	q := consumeRabbit(t, rs.URL(), wh)

	var ids []string
	for i := range 200 {
		ids = append(ids, c.publish(t, fmt.Sprintf("paid_%03d", i), "order.paid")...)
	}
	eventually(t, 60*time.Second, "200 deliveries in the queue", q.has(ids))

	// An update that leaves the password out keeps it.
	if _, err := c.endpoints.UpdateEndpoint(c.ctx(), &controlv1.UpdateEndpointRequest{EndpointId: created.GetEndpoint().GetEndpointId(),
		Settings:   &controlv1.EndpointSettings{Url: "amqp://" + rs.User + "@" + rs.Addr() + "/?routing_key=orders&exchange=hooks", Description: "kept"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"url", "description"}}}); err != nil {
		t.Fatalf("update without the password: %v", err)
	}
	more := c.publish(t, "after_update", "order.paid")
	eventually(t, 30*time.Second, "a delivery after an update that kept the password", q.has(more))

	// Nothing bound to the routing key, and a wrong password: the attempt
	// fails and says why.
	for _, tc := range []struct{ id, url, want string }{
		{"ep_unbound", base + "/?exchange=hooks&routing_key=nowhere", "no queue is bound"},
		{"ep_badpass", "amqp://" + rs.User + ":wrong@" + rs.Addr() + "/?exchange=hooks&routing_key=orders", "credentials"},
	} {
		if _, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: tc.id, Settings: &controlv1.EndpointSettings{
			Url: tc.url, EventTypes: []string{"order.refused." + tc.id},
		}}); err != nil {
			t.Fatalf("create %s: %v", tc.id, err)
		}
		id := c.publish(t, "refused_"+tc.id, "order.refused."+tc.id)[0]
		eventually(t, 30*time.Second, tc.id+": a failed attempt naming the cause", func() bool {
			d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: id})
			return err == nil && len(d.GetAttempts()) > 0 && strings.Contains(d.GetAttempts()[0].GetError(), tc.want)
		})
	}

	// The broker down until the endpoint's circuit opens on the failed
	// attempts: deliveries wait, and succeed once it is back.
	rs.Kill()
	var during []string
	for i := range 20 {
		during = append(during, c.publish(t, fmt.Sprintf("down_%02d", i), "order.paid")...)
	}
	waitCircuitOpen(t, c, created.GetEndpoint().GetEndpointId(), "while the broker is down")
	restart(t, rs)
	eventually(t, 90*time.Second, "the deliveries held while the broker was down", q.has(during))
	eventually(t, 30*time.Second, "every earlier delivery still in the queue's count", q.has(ids))
}
