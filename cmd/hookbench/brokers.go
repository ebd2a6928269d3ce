package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookline/hookline/internal/brokers"
)

// Broker destinations: the "brokers" scenario starts nats-server (with
// JetStream) and RabbitMQ on loopback, points endpoints at them, and
// counts what each broker holds, read back by a consumer that hands every
// message to the receiver as a pulled delivery (its signature checked, its
// id and bytes recorded), so the ledger judges brokers as it judges HTTP.

// natsStream is the stream that takes every subject of the run.
const (
	natsStream        = "HOOKBENCH"
	natsSubjectPrefix = "hookbench."
	natsDupWindow     = 10 * time.Minute
)

// brokerRun is the brokers of one run and their consumers.
type brokerRun struct {
	b          *Bench
	dir        string
	nats, amqp *brokers.Server
	consumers  sync.WaitGroup
	cancel     context.CancelFunc
}

// startBrokers starts both brokers under a temporary directory and the
// NATS stream, and consumers that read back what each broker holds.
func (b *Bench) startBrokers(ctx context.Context) (*brokerRun, error) {
	dir, err := os.MkdirTemp("", "hookbench-brokers-")
	if err != nil {
		return nil, err
	}
	r := &brokerRun{b: b, dir: dir}
	for _, kind := range []brokers.Kind{brokers.NATS, brokers.RabbitMQ} {
		sub := dir + "/" + string(kind)
		if err := os.Mkdir(sub, 0o700); err != nil {
			r.close()
			return nil, err
		}
		fmt.Fprintf(b.stderr, "hookbench: starting %s\n", kind)
		s, err := brokers.Start(ctx, kind, sub)
		if err != nil {
			r.close()
			return nil, err
		}
		if kind == brokers.NATS {
			r.nats = s
		} else {
			r.amqp = s
		}
	}
	nc, err := nats.Connect(r.nats.URL())
	if err != nil {
		r.close()
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{natsSubjectPrefix + ">"},
			Storage: jetstream.FileStorage, Duplicates: natsDupWindow})
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("create the NATS stream: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.consumers.Go(func() { r.consumeNATS(cctx) })
	return r, nil
}

// close stops the consumers and the brokers and removes their stores.
func (r *brokerRun) close() {
	if r.cancel != nil {
		r.cancel()
		r.consumers.Wait()
	}
	for _, s := range []*brokers.Server{r.nats, r.amqp} {
		if s != nil {
			s.Kill()
		}
	}
	_ = os.RemoveAll(r.dir)
}

// url is the URL of endpoint name on the broker kind: a subject of the
// stream, or a durable queue of its own on the default exchange (with the
// broker's credentials, which the endpoint seals).
func (r *brokerRun) url(kind brokers.Kind, name string) string {
	if kind == brokers.NATS {
		return r.nats.URL() + "/" + natsSubjectPrefix + name
	}
	return r.amqp.URL() + "/?routing_key=" + url.QueryEscape(name)
}

// declareQueues declares a durable queue per endpoint name and starts a
// consumer for each.
func (r *brokerRun) declareQueues(names []string) error {
	conn, err := amqp.Dial(r.amqp.URL())
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	for _, name := range names {
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare queue %s: %w", name, err)
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	prev := r.cancel
	r.cancel = func() { cancel(); prev() }
	r.consumers.Go(func() { r.consumeAMQP(cctx, names) })
	return nil
}

// consumeNATS reads the stream from its start with an ordered consumer
// (which survives reconnections) and hands each message to the receiver.
func (r *brokerRun) consumeNATS(ctx context.Context) {
	nc, err := nats.Connect(r.nats.URL(), nats.MaxReconnects(-1))
	if err != nil {
		fmt.Fprintf(r.b.stderr, "hookbench: NATS consumer: %v\n", err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	cons, err := js.OrderedConsumer(ctx, natsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		fmt.Fprintf(r.b.stderr, "hookbench: NATS consumer: %v\n", err)
		return
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		r.b.recv.Take(strings.TrimPrefix(m.Subject(), natsSubjectPrefix), http.Header(m.Headers()), m.Data())
	})
	if err != nil {
		fmt.Fprintf(r.b.stderr, "hookbench: NATS consumer: %v\n", err)
		return
	}
	<-ctx.Done()
	cc.Stop()
}

// consumeAMQP consumes every queue, acknowledging each message once the
// receiver has recorded it, reconnecting while ctx lasts.
func (r *brokerRun) consumeAMQP(ctx context.Context, queues []string) {
	for ctx.Err() == nil {
		err := r.consumeAMQPOnce(ctx, queues)
		if ctx.Err() == nil {
			fmt.Fprintf(r.b.stderr, "hookbench: RabbitMQ consumer: %v; reconnecting\n", err)
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
	}
}

func (r *brokerRun) consumeAMQPOnce(ctx context.Context, queues []string) error {
	conn, err := amqp.Dial(r.amqp.URL())
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(500, 0, false); err != nil {
		return err
	}
	type delivery struct {
		queue string
		amqp.Delivery
	}
	all := make(chan delivery)
	for _, q := range queues {
		msgs, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			return err
		}
		go func() {
			for m := range msgs {
				select {
				case all <- delivery{q, m}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-closed:
			return fmt.Errorf("connection closed: %v", e)
		case m := <-all:
			h := http.Header{}
			for k, v := range m.Headers {
				if s, ok := v.(string); ok {
					h.Set(k, s)
				}
			}
			r.b.recv.Take(m.queue, h, m.Body)
			if err := m.Ack(false); err != nil {
				return err
			}
		}
	}
}

// cpuUse is the CPU the node and a broker used so far.
type cpuUse struct{ node, broker time.Duration }

// cpu reads the CPU the node and the broker of kind ("" for none) used so
// far; what cannot be read counts 0.
func (r *brokerRun) cpu(kind brokers.Kind) cpuUse {
	var u cpuUse
	if nu, err := r.b.node.Usage(); err == nil {
		u.node = nu.CPU
	}
	s := map[brokers.Kind]*brokers.Server{brokers.NATS: r.nats, brokers.RabbitMQ: r.amqp}[kind]
	if s != nil && s.PID() > 0 {
		if bu, err := procUsage(s.PID()); err == nil {
			u.broker = bu.CPU
		}
	}
	return u
}

// brokerPhase is one phase of the scenario: a destination, and whether
// the node is killed during it.
type brokerPhase struct {
	name  string
	kind  brokers.Kind // "" for HTTP
	kills int
}

// brokerScenario runs, in one run: the same load as fast as accepted to
// HTTP, NATS and RabbitMQ endpoints (deliveries/s of each), then
// --broker-deliveries (10,000) at --rate events/s to NATS and to RabbitMQ endpoints while
// the node is killed with SIGKILL --kills times in each: lost and repeats
// counted from what each broker holds.
func brokerScenario(ctx context.Context, b *Bench) (Summary, error) {
	if b.node == nil {
		return Summary{}, errors.New("brokers: hookbench must start the node to kill it; drop --node")
	}
	r, err := b.startBrokers(ctx)
	if err != nil {
		return Summary{}, err
	}
	defer r.close()
	phases := []brokerPhase{
		{name: "http"}, {name: "nats", kind: brokers.NATS}, {name: "rabbitmq", kind: brokers.RabbitMQ},
		{name: "nats_kills", kind: brokers.NATS, kills: max(b.cfg.Kills, 1)},
		{name: "rabbitmq_kills", kind: brokers.RabbitMQ, kills: max(b.cfg.Kills, 1)},
	}
	extra := map[string]float64{}
	start := time.Now()
	for i, p := range phases {
		b.destination = func(name string) string { return b.recv.URL(name) }
		if p.kind != "" {
			b.destination = func(name string) string { return r.url(p.kind, name) }
		}
		ts, err := b.makeTenants(ctx, fmt.Sprintf("b%d", i))
		if err != nil {
			return Summary{}, err
		}
		if p.kind == brokers.RabbitMQ {
			var names []string
			for _, t := range ts {
				names = append(names, t.Endpoints...)
			}
			if err := r.declareQueues(names); err != nil {
				return Summary{}, err
			}
		}
		cpu := r.cpu(p.kind)
		s, err := b.brokerPhase(ctx, p, ts, i+1)
		if err != nil {
			return s, err
		}
		used := r.cpu(p.kind)
		fmt.Fprintf(b.stderr, "hookbench: %s: %d of %d delivered, %.0f/s, lost %d, duplicates %d\n",
			p.name, s.Deliveries, s.Expected, s.DeliveriesPerSec, s.Lost, s.Duplicates)
		extra[p.name+"_deliveries"] = float64(s.Deliveries)
		extra[p.name+"_lost"] = float64(s.Lost)
		extra[p.name+"_duplicates"] = float64(s.Duplicates)
		if p.kills == 0 {
			extra[p.name+"_deliveries_per_sec"] = s.DeliveriesPerSec
			if k := float64(s.Deliveries) / 1000; k > 0 {
				extra[p.name+"_node_cpu_s_per_1k"] = round((used.node-cpu.node).Seconds()/k, 3)
				if p.kind != "" {
					extra[p.name+"_broker_cpu_s_per_1k"] = round((used.broker-cpu.broker).Seconds()/k, 3)
				}
			}
		} else {
			extra[p.name+"_kills"] = float64(p.kills)
		}
	}
	s := b.Summarize("brokers", start)
	if viaHTTP := extra["http_deliveries_per_sec"]; viaHTTP > 0 {
		extra["nats_to_http"] = round(extra["nats_deliveries_per_sec"]/viaHTTP, 3)
		extra["rabbitmq_to_http"] = round(extra["rabbitmq_deliveries_per_sec"]/viaHTTP, 3)
	}
	addExtra(&s, extra)
	s.Notes = append(s.Notes, "deliveries, lost and duplicates of the broker phases are counted from what the broker holds, read back by a consumer; nats_kills_duplicates counts messages the stream stored twice")
	return s, nil
}

// brokerPhase publishes one phase's load: as fast as accepted for
// --duration, or, with kills, --broker-deliveries at --rate events/s
// while the node is killed, evenly over the time that takes.
func (b *Bench) brokerPhase(ctx context.Context, p brokerPhase, ts []*Tenant, phase int) (Summary, error) {
	fmt.Fprintf(b.stderr, "hookbench: phase %s\n", p.name)
	if p.kills == 0 {
		return b.publishAndAwait(ctx, "brokers", b.load(ts, 0, b.cfg.Duration, phase))
	}
	start := time.Now()
	events := b.cfg.BrokerDeliveries / int64(b.cfg.Fanout)
	span := time.Duration(float64(events) / b.cfg.Rate * float64(time.Second))
	killed := make(chan error, 1)
	go func() { killed <- b.killLoop(ctx, start, span/time.Duration(p.kills+1), p.kills) }()
	l := b.load(ts, b.cfg.Rate, 10*span, phase)
	l.Retry, l.Events = true, events
	if _, err := b.Publish(ctx, l); err != nil {
		return Summary{}, err
	}
	if err := <-killed; err != nil {
		return Summary{}, err
	}
	published := time.Now()
	awaitErr := b.Await(ctx, b.cfg.Drain)
	s := b.Summarize("brokers", start, phase)
	s.DrainS = round(time.Since(published).Seconds(), 2)
	if awaitErr != nil {
		s.Notes = append(s.Notes, awaitErr.Error())
	}
	return s, nil
}
