package attempt

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// NATS JetStream destinations: nats://host[:port]/subject.
const (
	SchemeNATS      = "nats"
	DefaultNATSPort = 4222
)

// brokerDial marks a dial's context as a broker's, whose default port
// the policy admits beside the https ports.
type brokerDial struct{}

// natsConns are the client's connections to NATS servers, one per
// host:port and credentials, made on first use and shared by every
// endpoint there with those credentials, each with its JetStream context.
type natsConns struct {
	mu    sync.Mutex // held while connecting
	cache idleCache[natsConn]
}

type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// checkSubject reports whether a nats:// URL's path names one subject.
func checkSubject(u *url.URL) error {
	subject := strings.TrimPrefix(u.Path, "/")
	switch {
	case subject == "":
		return blocked(RuleURL, "a nats:// URL names the subject to publish to as its path, e.g. nats://nats.example.com/webhooks.orders")
	case u.RawQuery != "":
		return blocked(RuleURL, "a nats:// URL takes no query")
	case strings.ContainsAny(subject, " \t\r\n*>/") || strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") || strings.Contains(subject, ".."):
		return blocked(RuleURL, "subject %q is not one NATS subject: use dot-separated tokens without spaces, slashes or wildcards", subject)
	}
	return nil
}

// natsDialer dials a NATS server through the egress policy.
type natsDialer struct{ c *Client }

func (d natsDialer) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), brokerDial{}, true), d.c.cfg.ConnectTimeout)
	defer cancel()
	return d.c.dialContext(ctx, network, address)
}

// natsConn returns the JetStream context of u's server, connecting when
// there is no connection or it was closed. A user with a password
// authenticates with both; a password alone (a token the endpoint sealed
// apart from the URL) or a user alone is a token.
func (c *Client) natsConn(u *url.URL, password string, ct *ClientTLS) (jetstream.JetStream, error) {
	c.nats.mu.Lock()
	defer c.nats.mu.Unlock()
	user := u.User.Username()
	key := u.Host + "\x00" + user + "\x00" + password
	if ct != nil {
		key += "\x00" + ct.Key
	}
	conn, err := c.nats.cache.get(key, func() (natsConn, error) { return c.dialNATS(u, password, ct) })
	if err != nil {
		return nil, err
	}
	if conn.nc.IsClosed() {
		if conn, err = c.dialNATS(u, password, ct); err != nil {
			return nil, err
		}
		c.nats.cache.replace(key, conn)
	}
	return conn.js, nil
}

// dialNATS connects to u's server with the URL's user and password (a
// user alone is a token).
func (c *Client) dialNATS(u *url.URL, password string, ct *ClientTLS) (natsConn, error) {
	user := u.User.Username()
	opts := []nats.Option{nats.SetCustomDialer(natsDialer{c}), nats.Name("hookline"),
		nats.Timeout(c.cfg.ConnectTimeout), nats.MaxReconnects(-1), nats.NoCallbacksAfterClientClose()}
	switch {
	case user != "" && password != "":
		opts = append(opts, nats.UserInfo(user, password))
	case password != "":
		opts = append(opts, nats.Token(password)) // a token, sealed apart from the URL
	case user != "":
		opts = append(opts, nats.Token(user))
	}
	if ct != nil { // a client certificate: TLS, with the endpoint's CA bundle if any
		conf, err := c.clientTLSConfig(ct)
		if err != nil {
			return natsConn{}, err
		}
		conf.ServerName = u.Hostname()
		opts = append(opts, nats.Secure(conf))
	}
	nc, err := nats.Connect(SchemeNATS+"://"+u.Host, opts...)
	if err != nil {
		return natsConn{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return natsConn{}, err
	}
	return natsConn{nc: nc, js: js}, nil
}

// publishNATS publishes req's payload to u's subject on JetStream, with
// the signature and delivery headers as message headers and the delivery
// id as Nats-Msg-Id, so that the stream drops a repeat within its
// duplicate window. The attempt succeeds when the stream acknowledges the
// message as stored. u passed the egress policy, which checks the subject.
func (c *Client) publishNATS(ctx context.Context, u *url.URL, req Request, o *Outcome, sig string) {
	js, err := c.natsConn(u, req.URLPassword, req.TLS)
	if err != nil {
		o.ErrorClass, o.Class, o.Error = hooklinev1.ErrorClass_ERROR_CLASS_CONNECT, Retryable{}, "cannot connect to the NATS server "+u.Host+": "+errorText(err)
		return
	}
	h := http.Header{}
	setHeaders(h, req, o, sig)
	subject := strings.TrimPrefix(u.Path, "/")
	msg := &nats.Msg{Subject: subject, Data: req.Payload, Header: nats.Header(h)}
	body := sha256.Sum256(req.Payload)
	o.BodySHA256, o.BodyBytes = body[:], int64(len(req.Payload))
	ack, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(req.DeliveryID))
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		o.ErrorClass, o.Class = hooklinev1.ErrorClass_ERROR_CLASS_CONNECT, Retryable{}
		o.Error = fmt.Sprintf("no JetStream stream takes subject %q on %s: create one (nats stream add --subjects %q)", subject, u.Host, subject)
	case err != nil:
		o.ErrorClass, o.Class, o.Error = classifyError(ctx, err)
	default:
		o.Class = Success{}
		ackText := fmt.Appendf(nil, `{"stream":%q,"seq":%d,"duplicate":%t}`, ack.Stream, ack.Sequence, ack.Duplicate)
		sum := sha256.Sum256(ackText)
		o.ResponsePrefix, o.ResponseSHA256, o.ResponseBytes = ackText, sum[:], int64(len(ackText))
	}
}
