package attempt

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// RabbitMQ (AMQP 0-9-1) destinations:
// amqp[s]://[user[:password]@]host[:port][/vhost]?exchange=X&routing_key=Y.
const (
	SchemeAMQP       = "amqp"
	SchemeAMQPS      = "amqps"
	DefaultAMQPPort  = 5672
	DefaultAMQPSPort = 5671
)

// IsBrokerScheme reports whether scheme names a broker destination.
func IsBrokerScheme(scheme string) bool {
	return scheme == SchemeNATS || scheme == SchemeAMQP || scheme == SchemeAMQPS
}

// brokerPort is the default port of a broker scheme, 0 for others.
func brokerPort(scheme string) uint16 {
	switch scheme {
	case SchemeNATS:
		return DefaultNATSPort
	case SchemeAMQP:
		return DefaultAMQPPort
	case SchemeAMQPS:
		return DefaultAMQPSPort
	}
	return 0
}

// amqpTarget is where an amqp:// URL publishes.
type amqpTarget struct {
	vhost, exchange, routingKey string
}

// parseAMQP reads the virtual host (the path, "/" when empty), the
// exchange and the routing key of an amqp:// URL.
func parseAMQP(u *url.URL) (amqpTarget, error) {
	t := amqpTarget{vhost: "/"}
	if p := strings.TrimPrefix(u.EscapedPath(), "/"); p != "" {
		if strings.Contains(p, "/") {
			return t, blocked(RuleURL, "an amqp:// URL's path is one virtual host; write a / inside its name as %%2F (the default vhost is the empty path)")
		}
		v, err := url.PathUnescape(p)
		if err != nil {
			return t, blocked(RuleURL, "the virtual host %q is not valid percent-encoding", p)
		}
		t.vhost = v
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return t, blocked(RuleURL, "cannot parse the query of the amqp:// URL: %v", err)
	}
	for name, values := range q {
		if name != "exchange" && name != "routing_key" {
			return t, blocked(RuleURL, "an amqp:// URL takes exchange and routing_key in its query, not %q", name)
		}
		if len(values) != 1 {
			return t, blocked(RuleURL, "%s is given %d times in the amqp:// URL; give it once", name, len(values))
		}
	}
	t.exchange, t.routingKey = q.Get("exchange"), q.Get("routing_key")
	switch {
	case t.exchange == "" && t.routingKey == "":
		return t, blocked(RuleURL, "an amqp:// URL names where to publish: ?exchange=<name>&routing_key=<key>, or ?routing_key=<queue> for the default exchange")
	case len(t.exchange) > 255 || len(t.routingKey) > 255 || len(t.vhost) > 255:
		return t, blocked(RuleURL, "the virtual host, exchange and routing key are each at most 255 bytes")
	case strings.ContainsAny(t.exchange+t.routingKey+t.vhost, "\x00\r\n"):
		return t, blocked(RuleURL, "the virtual host, exchange and routing key must not hold control characters")
	}
	return t, nil
}

// amqpConns are the client's connections to RabbitMQ servers, one per
// server, virtual host and credentials, each with a pool of channels in
// confirm mode.
type amqpConns struct {
	cache idleCache[*amqpConn]
}

type amqpConn struct {
	dial sync.Mutex // held while connecting
	mu   sync.Mutex // guards conn and idle
	conn *amqp.Connection
	idle []*amqpChannel
}

// amqpChannel is a channel in confirm mode with the listeners of its
// returned messages and its closing. One publish uses it at a time, so a
// return on it is that publish's.
type amqpChannel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
}

// amqpDialer dials a RabbitMQ server through the egress policy; the
// library clears the deadline once the connection is open.
func (c *Client) amqpDialer(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), brokerDial{}, true), c.cfg.ConnectTimeout)
	defer cancel()
	conn, err := c.dialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	// Bound the TLS and AMQP handshakes too.
	_ = conn.SetDeadline(time.Now().Add(2 * c.cfg.ConnectTimeout))
	return conn, nil
}

// amqpEntry returns the connection entry for u and password, made on
// first use.
func (c *Client) amqpEntry(key string) *amqpConn {
	e, _ := c.amqp.cache.get(key, func() (*amqpConn, error) { return &amqpConn{}, nil })
	return e
}

// amqpChannel takes an idle channel of u's connection, or opens one,
// connecting first when there is no open connection.
func (c *Client) amqpChannel(u *url.URL, t amqpTarget, password string, ct *ClientTLS) (*amqpConn, *amqpChannel, error) {
	user := u.User.Username()
	key := u.Scheme + "://" + u.Host + "\x00" + t.vhost + "\x00" + user + "\x00" + password
	if ct != nil {
		key += "\x00" + ct.Key
	}
	e := c.amqpEntry(key)
	e.mu.Lock()
	for len(e.idle) > 0 {
		ch := e.idle[len(e.idle)-1]
		e.idle = e.idle[:len(e.idle)-1]
		if !ch.ch.IsClosed() {
			e.mu.Unlock()
			return e, ch, nil
		}
	}
	conn := e.conn
	e.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		var err error
		if conn, err = c.amqpConnect(e, u, t, password, ct); err != nil {
			return nil, nil, err
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, nil, err
	}
	return e, &amqpChannel{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1)), closed: ch.NotifyClose(make(chan *amqp.Error, 1))}, nil
}

// amqpConnect opens e's connection unless another attempt just did.
func (c *Client) amqpConnect(e *amqpConn, u *url.URL, t amqpTarget, password string, ct *ClientTLS) (*amqp.Connection, error) {
	e.dial.Lock()
	defer e.dial.Unlock()
	e.mu.Lock()
	conn := e.conn
	e.mu.Unlock()
	if conn != nil && !conn.IsClosed() {
		return conn, nil
	}
	dialURL := url.URL{Scheme: u.Scheme, Host: u.Host}
	if user := u.User.Username(); user != "" {
		dialURL.User = url.UserPassword(user, password)
	}
	cfg := amqp.Config{
		Dial: c.amqpDialer, Vhost: t.vhost, Heartbeat: 10 * time.Second,
		Properties: amqp.Table{"connection_name": "hookline"},
	}
	if u.Scheme == SchemeAMQPS {
		cfg.TLSClientConfig = c.transport.TLSClientConfig.Clone()
		if ct != nil { // a client certificate (RabbitMQ's EXTERNAL or TLS peer verification)
			var err error
			if cfg.TLSClientConfig, err = c.clientTLSConfig(ct); err != nil {
				return nil, err
			}
		}
		cfg.TLSClientConfig.ServerName = u.Hostname()
	}
	conn, err := amqp.DialConfig(dialURL.String(), cfg)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.conn, e.idle = conn, nil
	e.mu.Unlock()
	return conn, nil
}

// maxIdleAMQPChannels bounds the channels kept open per connection.
const maxIdleAMQPChannels = 1024

// put returns a channel to the pool, or closes it when the pool is full
// or the channel is in doubt.
func (e *amqpConn) put(ch *amqpChannel, healthy bool) {
	if healthy {
		e.mu.Lock()
		if len(e.idle) < maxIdleAMQPChannels && !ch.ch.IsClosed() {
			e.idle = append(e.idle, ch)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
	}
	_ = ch.ch.Close()
}

// publishAMQP publishes req's payload to u's exchange with its routing
// key, persistent and mandatory, with the signature and delivery headers
// as message headers and the delivery id as message-id. The attempt
// succeeds when the broker confirms the message (for a durable queue,
// once it is written to disk); a message no queue takes, a negative
// confirm or a closed channel is retried. u passed the egress policy.
func (c *Client) publishAMQP(ctx context.Context, u *url.URL, req Request, o *Outcome, sig string) {
	t, err := parseAMQP(u)
	if err != nil {
		o.ErrorClass, o.Class, o.Error = classifyError(ctx, err)
		return
	}
	e, ch, err := c.amqpChannel(u, t, req.URLPassword, req.TLS)
	if err != nil {
		o.ErrorClass, o.Class, o.Error = amqpError(ctx, u, err)
		return
	}
	h := http.Header{}
	setHeaders(h, req, o, sig)
	table := make(amqp.Table, len(h))
	for name, v := range h {
		table[strings.ToLower(name)] = v[0]
	}
	contentType := req.ContentType
	if contentType == "" {
		contentType = "application/json"
	}
	body := sha256.Sum256(req.Payload)
	o.BodySHA256, o.BodyBytes = body[:], int64(len(req.Payload))
	for len(ch.returns) > 0 {
		<-ch.returns // a return of an earlier publish whose confirm timed out
	}
	dc, err := ch.ch.PublishWithDeferredConfirmWithContext(ctx, t.exchange, t.routingKey, true, false, amqp.Publishing{
		Headers: table, ContentType: contentType, DeliveryMode: amqp.Persistent,
		MessageId: req.DeliveryID, Timestamp: o.Started, Body: req.Payload,
	})
	if err != nil {
		e.put(ch, false)
		o.ErrorClass, o.Class, o.Error = amqpError(ctx, u, err)
		return
	}
	acked, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		e.put(ch, false) // its confirm may still come: never reuse it
		o.ErrorClass, o.Class, o.Error = classifyError(ctx, err)
		if o.ErrorClass == hooklinev1.ErrorClass_ERROR_CLASS_RESET {
			o.ErrorClass, o.Error = hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT, "the broker did not confirm the message within the attempt timeout"
		}
	case !acked:
		e.put(ch, false)
		o.ErrorClass, o.Class = hooklinev1.ErrorClass_ERROR_CLASS_RESET, Retryable{}
		o.Error = "the broker did not take the message (negative confirm)"
		select {
		case reason := <-ch.closed:
			if reason != nil {
				o.ErrorClass, o.Class, o.Error = amqpError(ctx, u, reason)
			}
		default:
		}
	default:
		select {
		case r, ok := <-ch.returns:
			if !ok { // the channel closed after the confirm: no return came
				break
			}
			e.put(ch, true)
			o.ErrorClass, o.Class = hooklinev1.ErrorClass_ERROR_CLASS_CONNECT, Retryable{}
			o.Error = fmt.Sprintf("the broker returned the message (%d %s): no queue is bound to exchange %q with routing key %q on vhost %q; bind one",
				r.ReplyCode, r.ReplyText, t.exchange, t.routingKey, t.vhost)
			return
		default:
		}
		e.put(ch, true)
		o.Class = Success{}
		ackText := fmt.Appendf(nil, `{"exchange":%q,"routing_key":%q,"confirmed":true}`, t.exchange, t.routingKey)
		sum := sha256.Sum256(ackText)
		o.ResponsePrefix, o.ResponseSHA256, o.ResponseBytes = ackText, sum[:], int64(len(ackText))
	}
}

// amqpError classifies a RabbitMQ failure: the broker's own refusals
// (an exchange that does not exist, credentials it refuses) say what to
// fix; network failures are classified like HTTP's.
func amqpError(ctx context.Context, u *url.URL, err error) (hooklinev1.ErrorClass, Class, string) {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		ec, class, text := classifyError(ctx, err)
		if ec == hooklinev1.ErrorClass_ERROR_CLASS_CONNECT || ec == hooklinev1.ErrorClass_ERROR_CLASS_RESET {
			text = "cannot reach the RabbitMQ server " + u.Host + ": " + text
		}
		return ec, class, text
	}
	text := "RabbitMQ " + strconv.Itoa(ae.Code) + ": " + ae.Reason
	switch ae.Code {
	case amqp.NotFound:
		text += " (declare the exchange, or fix exchange= in the URL)"
	case amqp.AccessRefused:
		text += " (the broker refuses these credentials or this vhost: check the URL's user and password)"
	}
	if len(text) > maxErrorText {
		text = text[:maxErrorText]
	}
	return hooklinev1.ErrorClass_ERROR_CLASS_CONNECT, Retryable{}, text
}

// close closes the connection and forgets its channels.
func (e *amqpConn) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		_ = e.conn.Close()
	}
	e.conn, e.idle = nil, nil
}
