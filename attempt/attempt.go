package attempt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Request is everything one attempt needs. The grain builds it from the
// delivery, the stored event and the endpoint's live secrets.
type Request struct {
	URL string // the endpoint URL as stored (normalised by CheckURL)

	// URLPassword is the password of a broker URL's user, which the
	// endpoint keeps sealed apart from its URL. It is a secret: never log
	// it.
	URLPassword string

	DeliveryID    string    // sent as webhook-id
	EventID       string    // sent as webhook-event-id
	EventType     string    // sent as webhook-event-type
	OccurredAt    time.Time // sent as webhook-occurred-at (RFC 3339) unless zero
	SchemaVersion string    // sent as webhook-schema-version unless empty

	// OrderingKey and Sequence are sent as webhook-ordering-key and
	// webhook-sequence on an endpoint ordered by key (unless empty or 0).
	OrderingKey string
	Sequence    int64

	Payload     []byte // the stored bytes, sent and signed as they are
	ContentType string // empty means application/json

	Secrets    []Secret // live HMAC secrets, each signs
	SigningKey []byte   // optional ed25519 seed for a v1a signature

	// Headers are the endpoint's static headers, sent as they are (their
	// names were checked by CheckHeaders). HeaderPrefix replaces
	// "webhook-" in the names of the headers Hookline sets; empty means
	// DefaultHeaderPrefix.
	Headers      map[string]string
	HeaderPrefix string

	// OAuth2, when set, makes the attempt carry a bearer token of this
	// grant, cached under TokenKey (the endpoint and its configuration
	// version) and shared by the attempts with the same key.
	OAuth2   *OAuth2
	TokenKey string

	// TLS, when set, is the endpoint's client certificate for mutual TLS
	// (and its receiver's CA bundle); the token request of OAuth2 uses it
	// too.
	TLS *ClientTLS

	// Traceparent and Tracestate are the attempt's W3C Trace Context (see
	// the tracing package), sent as the traceparent and tracestate headers
	// unless empty.
	Traceparent string
	Tracestate  string

	// Timeout bounds the whole attempt; 0 means the client's Timeout, and
	// it is cut to MaxAttemptTimeout.
	Timeout time.Duration

	// Now is the clock; nil means time.Now. Started, and so the signed
	// timestamp, come from it.
	Now func() time.Time
}

// Do runs one attempt: it signs req.Payload, POSTs it to req.URL through the
// egress policy and classifies the answer. It never returns an error: every
// failure is an [Outcome] with a [Class] and an error class. Do is safe for
// concurrent use; it returns when the attempt ends or its timeout passes.
func (c *Client) Do(ctx context.Context, req Request) Outcome {
	now := req.Now
	if now == nil {
		now = time.Now
	}
	o := Outcome{Started: now()}
	for _, s := range req.Secrets {
		o.KeyVersions = append(o.KeyVersions, s.Version)
	}
	c.do(ctx, req, &o, now)
	o.Finished = now()
	o.Latency = o.Finished.Sub(o.Started)
	if o.Class == nil {
		o.Class = Retryable{}
	}
	return o
}

func (c *Client) do(parent context.Context, req Request, o *Outcome, now func() time.Time) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = c.cfg.Timeout
	}
	timeout = min(timeout, MaxAttemptTimeout)
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()

	fail := func(err error) {
		o.ErrorClass, o.Class, o.Error = classifyError(parent, err)
		if o.ErrorClass == hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT && ctx.Err() != nil && parent.Err() == nil {
			o.Error = fmt.Sprintf("no answer within the attempt timeout (%v)", timeout)
		}
	}
	internal := func(err error) {
		o.ErrorClass, o.Class, o.Error = hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, Retryable{}, errorText(err)
	}

	// The URL passed CheckURL at registration; the static rules run again
	// because rules and configuration change. DNS is checked when dialing,
	// or here when a proxy does the dialing.
	var u *url.URL
	if c.cfg.Proxy != nil {
		var err error
		if u, err = c.policy.CheckURL(ctx, req.URL); err != nil {
			fail(err)
			return
		}
	} else {
		t, err := c.policy.checkStatic(req.URL)
		if err != nil {
			fail(err)
			return
		}
		u = t.url
	}

	sig, err := Sign(req.DeliveryID, o.Started, req.Payload, req.Secrets, req.SigningKey)
	if err != nil {
		internal(err)
		return
	}
	switch u.Scheme {
	case SchemeNATS:
		c.publishNATS(ctx, u, req, o, sig)
		return
	case SchemeAMQP, SchemeAMQPS:
		c.publishAMQP(ctx, u, req, o, sig)
		return
	}
	resp, err := c.exchange(ctx, u, req, o, sig, now)
	var te *TokenError
	switch {
	case errors.As(err, &te):
		o.ErrorClass, o.Class, o.Error = hooklinev1.ErrorClass_ERROR_CLASS_TOKEN, Retryable{}, te.Error()
		return
	case err != nil:
		fail(err)
		return
	}
	defer resp.Body.Close()

	o.Headers = now().Sub(o.Started)
	o.Status = resp.StatusCode
	o.Class, o.ErrorClass = ClassifyStatus(resp.StatusCode)
	o.RetryAfter, o.HasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now())
	if _, ok := o.Class.(Success); !ok {
		o.Error = statusText(resp.StatusCode)
	}

	h := sha256.New()
	capture := &bodyCapture{hash: h, keep: c.cfg.PrefixBytes}
	buf := copyBuffers.Get().(*[]byte)
	_, readErr := io.CopyBuffer(capture, io.LimitReader(resp.Body, c.cfg.MaxBodyBytes), *buf)
	copyBuffers.Put(buf)
	if readErr == nil && capture.n == c.cfg.MaxBodyBytes {
		var one [1]byte
		n, _ := resp.Body.Read(one[:])
		o.ResponseTruncated = n > 0
	}
	o.ResponseSHA256 = h.Sum(nil)
	o.ResponsePrefix = capture.prefix
	o.ResponseBytes = capture.n
	// The status decides the outcome; a body that breaks off only adds to
	// the description of a failure.
	if readErr != nil && o.Error != "" {
		o.Error += "; reading the body: " + errorText(readErr)
	}
}

// exchange sends req to u, with a bearer token when req has an OAuth2
// grant. A receiver that refuses a cached token (revoked, or its clock
// ahead of ours) gets a new one, once. A token that cannot be had is a
// *TokenError.
func (c *Client) exchange(ctx context.Context, u *url.URL, req Request, o *Outcome, sig string, now func() time.Time) (*http.Response, error) {
	hc, err := c.clientFor(req.TLS)
	if err != nil {
		return nil, err
	}
	var bearer string
	fresh := false
	if req.OAuth2 != nil {
		if bearer, fresh, err = c.token(ctx, hc, req.TokenKey, req.OAuth2, "", now); err != nil {
			return nil, err
		}
	}
	body := sha256.Sum256(req.Payload)
	o.BodySHA256, o.BodyBytes = body[:], int64(len(req.Payload))
	resp, err := c.send(ctx, hc, u, req, o, sig, bearer)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || req.OAuth2 == nil || fresh {
		return resp, err
	}
	resp.Body.Close()
	if bearer, _, err = c.token(ctx, hc, req.TokenKey, req.OAuth2, bearer, now); err != nil {
		return nil, err
	}
	return c.send(ctx, hc, u, req, o, sig, bearer)
}

// send POSTs req's payload to u with its headers, and bearer, if any, as
// its Authorization.
func (c *Client) send(ctx context.Context, hc *http.Client, u *url.URL, req Request, o *Outcome, sig, bearer string) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(req.Payload))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", errorTextErr(err))
	}
	setHeaders(hreq.Header, req, o, sig)
	if bearer != "" {
		hreq.Header.Set("Authorization", "Bearer "+bearer)
	}
	return hc.Do(hreq)
}

// copyBuffers hold the buffers that read answers' bodies: io.Copy would
// make a 32 KB one per attempt (the body is behind a LimitedReader), which
// was 44 % of the bytes a node allocated while delivering, and as much of
// the garbage collector's pace.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

func setHeaders(h http.Header, req Request, o *Outcome, sig string) {
	for name, v := range req.Headers {
		h.Set(name, v)
	}
	p := req.HeaderPrefix
	if p == "" {
		p = DefaultHeaderPrefix
	}
	h.Set(p+"id", req.DeliveryID)
	h.Set(p+"timestamp", strconv.FormatInt(o.Started.Unix(), 10))
	h.Set(p+"signature", sig)
	if req.EventType != "" {
		h.Set(p+"event-type", req.EventType)
	}
	if req.EventID != "" {
		h.Set(p+"event-id", req.EventID)
	}
	if !req.OccurredAt.IsZero() {
		h.Set(p+"occurred-at", req.OccurredAt.UTC().Format(time.RFC3339Nano))
	}
	if req.SchemaVersion != "" {
		h.Set(p+"schema-version", req.SchemaVersion)
	}
	if req.OrderingKey != "" {
		h.Set(p+"ordering-key", req.OrderingKey)
		if req.Sequence > 0 {
			h.Set(p+"sequence", strconv.FormatInt(req.Sequence, 10))
		}
	}
	if req.Traceparent != "" {
		h.Set("traceparent", req.Traceparent)
		if req.Tracestate != "" {
			h.Set("tracestate", req.Tracestate)
		}
	}
	if len(o.KeyVersions) > 0 {
		v := make([]string, len(o.KeyVersions))
		for i, n := range o.KeyVersions {
			v[i] = strconv.Itoa(int(n))
		}
		h.Set(p+"key-version", strings.Join(v, " "))
	}
	ct := req.ContentType
	if ct == "" {
		ct = "application/json"
	}
	h.Set("Content-Type", ct)
	h.Set("User-Agent", UserAgent)
}

func statusText(status int) string {
	s := "HTTP " + strconv.Itoa(status)
	if t := http.StatusText(status); t != "" {
		s += " " + t
	}
	switch {
	case status >= 300 && status <= 399:
		s += "; redirects are not followed, register the final URL"
	case status == http.StatusGone:
		s += "; the receiver says the endpoint is gone"
	}
	return s
}

// errorTextErr is errorText as an error, for wrapping.
func errorTextErr(err error) error { return fmt.Errorf("%s", errorText(err)) }

// Headers returns the headers an attempt of req started at would send,
// signed with every secret of req: what a pull consumer gets in place of
// the request, so that the same verifier checks both.
func Headers(req Request, at time.Time) (http.Header, error) {
	sig, err := Sign(req.DeliveryID, at, req.Payload, req.Secrets, req.SigningKey)
	if err != nil {
		return nil, err
	}
	o := Outcome{Started: at}
	for _, s := range req.Secrets {
		o.KeyVersions = append(o.KeyVersions, s.Version)
	}
	h := http.Header{}
	setHeaders(h, req, &o, sig)
	h.Del("User-Agent")
	return h, nil
}
