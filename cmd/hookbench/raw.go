package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/attempt"
)

// RawConfig configures the raw loop. The zero value means the defaults.
type RawConfig struct {
	// URL is the receiver endpoint to POST to. Required.
	URL string
	// Secret signs every request (whsec_...). Required.
	Secret string
	// Workers is the number of concurrent senders; 0 means 64.
	Workers int
	// Duration is how long to send; 0 means 10 s.
	Duration time.Duration
	// PayloadBytes is the body size; 0 means 1536 (1.5 KB).
	PayloadBytes int
	// Prefix starts every webhook-id, so runs never share ids; "" means "raw".
	Prefix string
}

// Validate reports a configuration that cannot run.
func (c RawConfig) Validate() error {
	if c.URL == "" {
		return errors.New("raw: no receiver URL")
	}
	if _, err := attempt.ParseSecret(c.Secret); err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	if c.Workers < 0 || c.Duration < 0 || c.PayloadBytes < 0 {
		return errors.New("raw: workers, duration and payload size must not be negative")
	}
	return nil
}

func (c RawConfig) withDefaults() RawConfig {
	setDefault(&c.Workers, 64)
	setDefault(&c.Duration, 10*time.Second)
	setDefault(&c.PayloadBytes, 1536)
	setDefault(&c.Prefix, "raw")
	return c
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// RawResult is what the raw loop achieved.
type RawResult struct {
	Sent      int64         `json:"sent"`
	Succeeded int64         `json:"succeeded"`
	Errors    int64         `json:"errors"`
	Elapsed   time.Duration `json:"-"`
	PerSec    float64       `json:"deliveries_per_sec"`
}

// Raw POSTs signed payloads (attempt.Sign, the same headers as Hookline)
// with a plain net/http client from cfg.Workers goroutines for cfg.Duration,
// without persistence: the machine's limit for the receiver. It returns when
// the duration has passed or ctx ends.
func Raw(ctx context.Context, cfg RawConfig) (RawResult, error) {
	if err := cfg.Validate(); err != nil {
		return RawResult{}, err
	}
	cfg = cfg.withDefaults()
	key, _ := attempt.ParseSecret(cfg.Secret)
	secrets := []attempt.Secret{{Version: 1, Key: key}}
	payload := Payload(cfg.PayloadBytes, "raw")

	transport := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        cfg.Workers,
		MaxIdleConnsPerHost: cfg.Workers,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var seq, sent, ok, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				id := cfg.Prefix + "_" + strconv.FormatInt(seq.Add(1), 10)
				now := time.Now()
				sig, err := attempt.Sign(id, now, payload, secrets, nil)
				if err != nil {
					failed.Add(1)
					return
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(payload))
				if err != nil {
					failed.Add(1)
					return
				}
				h := req.Header
				h.Set("webhook-id", id)
				h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
				h.Set("webhook-signature", sig)
				h.Set("webhook-event-type", "bench.raw")
				h.Set("webhook-event-id", id)
				h.Set("webhook-key-version", "1")
				h.Set("Content-Type", "application/json")
				h.Set("User-Agent", attempt.UserAgent)
				sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := RawResult{Sent: sent.Load(), Succeeded: ok.Load(), Errors: failed.Load(), Elapsed: elapsed}
	res.PerSec = round(float64(res.Succeeded)/elapsed.Seconds(), 1)
	if res.Succeeded == 0 {
		return res, fmt.Errorf("raw: no request succeeded in %v (%d errors): is the receiver at %s answering 2xx?", elapsed.Round(time.Millisecond), res.Errors, cfg.URL)
	}
	return res, nil
}

// Payload returns n bytes of JSON that look like a business event, marked
// with tag so payloads of different events differ.
func Payload(n int, tag string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"object":"invoice","tag":"`)
	b.WriteString(tag)
	b.WriteString(`","pad":"`)
	filler := make([]byte, max(0, n-b.Len()-2))
	rand.Read(filler)
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for i, c := range filler {
		filler[i] = alphabet[int(c)%len(alphabet)]
	}
	b.Write(filler)
	b.WriteString(`"}`)
	return b.Bytes()
}

// ownReceiver starts a receiver for the raw loop on loopback with a new
// secret and points cfg at it; stop ends it and is safe to call twice.
func ownReceiver(ctx context.Context, cfg *RawConfig) (*Receiver, func(), error) {
	secret, err := attempt.NewSecret(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	r, err := NewReceiver("127.0.0.1:0", []string{secret}, Behaviour{})
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(rctx)
	}()
	cfg.URL, cfg.Secret = r.URL(rawEndpoint), secret
	return r, func() { cancel(); <-done }, nil
}
