package attempt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Class is the verdict on one attempt: [Success], [Retryable] or
// [Permanent]. It is a sealed set; switch on the type.
type Class interface {
	isClass()
	String() string
}

// Success is any 2xx answer. The delivery ends.
type Success struct{}

// Retryable allows another automatic attempt: 408, 429, 5xx, network
// errors, resets, timeouts, TLS and DNS failures and policy refusals.
type Retryable struct {
	// OpensCircuitSooner marks failures that say more about the endpoint
	// than about one request (TLS, DNS, policy refusals): the endpoint's
	// breaker should count them more heavily.
	OpensCircuitSooner bool
}

// Permanent ends the delivery as failed for this configuration: 3xx and
// 4xx other than 408 and 429.
type Permanent struct {
	// Gone is set for 410: the receiver says the endpoint is gone, and the
	// caller pauses the endpoint.
	Gone bool
}

func (Success) isClass()   {}
func (Retryable) isClass() {}
func (Permanent) isClass() {}

// String returns "success".
func (Success) String() string { return "success" }

// String returns "retryable", with a mark when it opens the circuit sooner.
func (r Retryable) String() string {
	if r.OpensCircuitSooner {
		return "retryable (opens circuit sooner)"
	}
	return "retryable"
}

// String returns "permanent", or "permanent (gone)" for 410.
func (p Permanent) String() string {
	if p.Gone {
		return "permanent (gone)"
	}
	return "permanent"
}

// ClassifyStatus classifies an HTTP status code: 2xx
// succeeds; 408, 429 and 5xx are retryable; 410 is permanent and gone; any
// other status (3xx, 4xx, and nonsense) is permanent. The error class is
// ERROR_CLASS_HTTP_STATUS for anything but success.
func ClassifyStatus(status int) (Class, hooklinev1.ErrorClass) {
	switch {
	case status >= 200 && status <= 299:
		return Success{}, hooklinev1.ErrorClass_ERROR_CLASS_UNSPECIFIED
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500 && status <= 599:
		return Retryable{}, hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS
	case status == http.StatusGone:
		return Permanent{Gone: true}, hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS
	default:
		return Permanent{}, hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS
	}
}

// Outcome is what one attempt did; the grain records it in an
// AttemptSucceeded or AttemptFailed event. It holds no secret, no
// signature and no URL query.
type Outcome struct {
	Started  time.Time     // by the Request's clock; also the signed timestamp
	Finished time.Time     // by the Request's clock
	Latency  time.Duration // Finished - Started

	Status     int                   // HTTP status; 0 when there was no answer
	Class      Class                 // never nil
	ErrorClass hooklinev1.ErrorClass // UNSPECIFIED on success
	Error      string                // short description; empty on success

	// BodySHA256 digests the exact body bytes sent (and signed), and
	// BodyBytes counts them; both unset when no request was sent (a URL
	// refused before it).
	BodySHA256 []byte
	BodyBytes  int64
	// Headers is the time from Started to the response's headers; 0
	// without an answer.
	Headers time.Duration

	ResponseSHA256    []byte // SHA-256 of the response bytes read (at most MaxBodyBytes)
	ResponsePrefix    []byte // the first PrefixBytes of the response body
	ResponseBytes     int64  // response bytes read
	ResponseTruncated bool   // the body was longer than MaxBodyBytes

	// RetryAfter is the receiver's Retry-After, as parsed (seconds or an
	// HTTP date, relative to Finished; a past date is 0), whatever the
	// status. HasRetryAfter says whether it was present and valid.
	RetryAfter    time.Duration
	HasRetryAfter bool

	// KeyVersions are the versions of the secrets that signed, in order.
	KeyVersions []int32
}

// RetryDelay returns the Retry-After to honour, clamped to [1 s, 1 h]: set
// only for 429 and 503 answers that carried one, else 0. Pass it to
// [Schedule.Next].
func (o Outcome) RetryDelay() time.Duration {
	if !o.HasRetryAfter || (o.Status != http.StatusTooManyRequests && o.Status != http.StatusServiceUnavailable) {
		return 0
	}
	return min(max(o.RetryAfter, MinRetryAfter), MaxRetryAfter)
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const maxSeconds = int64(MaxRetryAfter/time.Second) * 24 // far beyond any clamp, no overflow
		var secs int64
		for i := 0; i < len(v) && secs <= maxSeconds; i++ {
			secs = secs*10 + int64(v[i]-'0')
		}
		return time.Duration(min(secs, maxSeconds)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

const maxErrorText = 200

// classifyError turns a request error into an error class, a Class and a
// short text. The parent context tells the caller's cancellation apart from
// the attempt's own deadline.
func classifyError(parent context.Context, err error) (hooklinev1.ErrorClass, Class, string) {
	text := errorText(err)
	var pe *PolicyError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &pe):
		// A refusal by policy is retryable, not permanent: the URL passed
		// at registration, so what changed is DNS (or the rules), and DNS
		// may change back. The breaker counts it heavily, so an endpoint
		// that keeps pointing inside stops being tried soon.
		return hooklinev1.ErrorClass_ERROR_CLASS_BLOCKED, Retryable{OpensCircuitSooner: true}, text
	case errors.Is(err, ErrResolve), errors.As(err, &dnsErr):
		return hooklinev1.ErrorClass_ERROR_CLASS_DNS, Retryable{OpensCircuitSooner: true}, text
	case parent.Err() != nil && !errors.Is(parent.Err(), context.DeadlineExceeded):
		return hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, Retryable{}, "attempt cancelled before an answer"
	case isTLS(err):
		if strings.Contains(text, "certificate required") {
			text += " (the receiver asks for a client certificate its CA signed: set the endpoint's auth.mtls)"
		}
		return hooklinev1.ErrorClass_ERROR_CLASS_TLS, Retryable{OpensCircuitSooner: true}, text
	case isTimeout(err):
		return hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT, Retryable{}, text
	case isConnect(err):
		return hooklinev1.ErrorClass_ERROR_CLASS_CONNECT, Retryable{}, text
	default:
		// Resets, EOFs, protocol errors and oversized response headers:
		// the connection broke during the exchange.
		return hooklinev1.ErrorClass_ERROR_CLASS_RESET, Retryable{}, text
	}
}

// errorText is a short description of err without the request URL, whose
// query may carry a customer's token.
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	s := err.Error()
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
	}
	return s
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isTLS(err error) bool {
	var (
		verr *tls.CertificateVerificationError
		rerr tls.RecordHeaderError
		aerr tls.AlertError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
	)
	if errors.As(err, &verr) || errors.As(err, &rerr) || errors.As(err, &aerr) ||
		errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr) {
		return true
	}
	// Alerts from the peer ("remote error: tls: …") have no exported type.
	return strings.Contains(err.Error(), "tls: ")
}

func isConnect(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EADDRNOTAVAIL) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// readBody reads at most max bytes of r, digesting all of them and keeping
// the first prefix bytes.
type bodyCapture struct {
	hash   io.Writer
	prefix []byte
	keep   int
	n      int64
}

func (b *bodyCapture) Write(p []byte) (int, error) {
	if room := b.keep - len(b.prefix); room > 0 {
		b.prefix = append(b.prefix, p[:min(room, len(p))]...)
	}
	b.n += int64(len(p))
	return b.hash.Write(p)
}
