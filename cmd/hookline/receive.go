package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/verify"
)

// receiveAbout is the paragraph of receive's -h text.
const receiveAbout = `Listens for webhooks, verifies each one's Standard Webhooks signature
(webhook-id, webhook-timestamp, webhook-signature) with the secret, prints
a line per webhook and answers 200, or 401 when the signature does not
verify. Without a secret it verifies nothing and answers 200. For trying
Hookline out: a real receiver verifies with the verify package.`

// receiveRun is `hookline receive`: a local receiver for trying Hookline
// out. It listens on --addr, verifies each webhook's signature with
// --secret, prints a line per webhook and answers it, until ctx ends
// (Ctrl-C, SIGTERM).
func receiveRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("receive")
	addr := fs.String("addr", "127.0.0.1:9000", "the address to listen on for webhooks")
	// The secret's default is read after parsing, so that -h never shows it.
	secret := fs.String("secret", "", "the endpoint's signing `secret` whsec_…, or several comma-separated during a rotation (default HOOKLINE_RECEIVER_SECRET); none verifies nothing")
	certFile := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	keyFile := fs.String("tls-key", "", "the PEM private key of --tls-cert")
	clientCA := fs.String("client-ca", "", "require of every sender a client certificate this PEM CA signed (mutual TLS; with --tls-cert)")
	oauth2 := fs.String("oauth2-client", "", "`ID:SECRET` of an OAuth2 client: serve a token endpoint at /token (client credentials) and require its bearer token on every webhook")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tlsCfg, err := receiverTLS(*certFile, *keyFile, *clientCA)
	if err != nil {
		return err
	}
	tokens, err := newTokenIssuer(*oauth2)
	if err != nil {
		return err
	}
	if *secret == "" {
		*secret = os.Getenv("HOOKLINE_RECEIVER_SECRET")
	}
	rcv := &receiver{out: stdout, tokens: tokens}
	mode := "no --secret: nothing is verified, every webhook is answered 200"
	if secrets := splitList(*secret); len(secrets) > 0 {
		v, err := verify.New(secrets[0], secrets[1:]...)
		if err != nil {
			return fmt.Errorf("--secret: %w; give the whsec_… secret that endpoints create printed", err)
		}
		rcv.verifier = v
		mode = fmt.Sprintf("verifying signatures with %d secret(s)", len(secrets))
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	scheme := "http"
	if tlsCfg != nil {
		lis, scheme = tls.NewListener(lis, tlsCfg), "https"
		if tlsCfg.ClientCAs != nil {
			mode += "; a client certificate required"
		}
	}
	if tokens != nil {
		mode += fmt.Sprintf("; OAuth2 token endpoint %s://%s/token, its bearer token required", scheme, lis.Addr())
	}
	fmt.Fprintf(stdout, "hookline receive: listening on %s://%s (%s); Ctrl-C stops\n", scheme, lis.Addr(), mode)
	return serveHTTP(ctx, lis, rcv)
}

// serveHTTP serves h on lis until ctx ends, then lets the requests in
// progress finish, for up to 5 s.
func serveHTTP(ctx context.Context, lis net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// Limits of a receiver.
const (
	// maxWebhookBody bounds the body a receiver reads; a longer one is
	// answered 413.
	maxWebhookBody = 1 << 20
	// maxBodyShown bounds the part of the body a line shows.
	maxBodyShown = 200
)

// receiver is the webhook receiver of `hookline receive` and of `hookline
// dev`: it verifies each POST's signature, prints a line per webhook and
// answers 200, or 401 when the signature does not verify; a GET (a probe)
// is answered 200 and not printed. It is safe for concurrent use; set its
// fields before it serves.
type receiver struct {
	out io.Writer
	// label starts each line ("receiver " in dev, whose output also has
	// lines of history).
	label string
	// verifier checks the signatures; nil verifies nothing.
	verifier *verify.Verifier
	// tokens, if set, serves /token and requires its bearer tokens.
	tokens *tokenIssuer
	// flakyEvent is an event id whose first flakyTimes webhooks are
	// answered 503 (dev's sample of retries); "" for none.
	flakyEvent string
	flakyTimes int

	mu     sync.Mutex // guards failed and the lines written to out
	failed int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		// A probe of whether it listens, not a webhook: not printed.
		fmt.Fprintln(w, "hookline receive: POST webhooks to any path")
		return
	}
	if r.tokens != nil && req.URL.Path == "/token" {
		r.tokens.ServeHTTP(w, req)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxWebhookBody))
	status, verdict := r.judge(req.Header, body, err)
	if r.tokens != nil && !r.tokens.valid(req.Header.Get("Authorization")) {
		status, verdict = http.StatusUnauthorized, "no bearer token of /token"
	} else if r.tokens != nil {
		verdict = "bearer token ok, " + verdict
	}
	if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
		verdict = fmt.Sprintf("client certificate %q, %s", req.TLS.PeerCertificates[0].Subject.CommonName, verdict)
	}
	r.mu.Lock()
	fmt.Fprintf(r.out, "%s%s  %s -> %d  %s\n", r.label, time.Now().Format("15:04:05"), describe(req.Header, verdict), status, shown(body))
	r.mu.Unlock()
	if status == http.StatusOK {
		w.WriteHeader(status)
		return
	}
	http.Error(w, verdict, status)
}

// judge decides the answer to a webhook, and says why.
func (r *receiver) judge(h http.Header, body []byte, readErr error) (status int, verdict string) {
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(readErr, &tooLong):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxWebhookBody)
	case readErr != nil:
		return http.StatusBadRequest, "body not read: " + readErr.Error()
	case r.verifier == nil:
		return http.StatusOK, "unverified"
	}
	if err := r.verifier.Verify(h, body); err != nil {
		return http.StatusUnauthorized, "signature refused: " + strings.TrimPrefix(err.Error(), "verify: ")
	}
	if r.flaky(h.Get("webhook-event-id")) {
		return http.StatusServiceUnavailable, "signature ok, failing on purpose"
	}
	return http.StatusOK, "signature ok"
}

// flaky reports whether this webhook of event is one to fail on purpose.
func (r *receiver) flaky(event string) bool {
	if r.flakyEvent == "" || event != r.flakyEvent {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed >= r.flakyTimes {
		return false
	}
	r.failed++
	return true
}

// describe names a webhook by its headers (webhook-id, and the event's
// type and id when sent), followed by the verdict.
func describe(h http.Header, verdict string) string {
	parts := []string{cmp.Or(h.Get(verify.HeaderID), "(no webhook-id)")}
	for _, name := range []string{"webhook-event-type", "webhook-event-id"} {
		if v := h.Get(name); v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(append(parts, verdict), "  ")
}

// shown is body as a line shows it: control characters as spaces, cut
// after maxBodyShown bytes.
func shown(body []byte) string {
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	cut := ""
	if len(s) > maxBodyShown {
		i := maxBodyShown
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, cut = s[:i], fmt.Sprintf("… (%d bytes)", len(body))
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s) + cut
}
