package attempt_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/verify"
)

// The test vector of the Standard Webhooks specification.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSecret(t testing.TB, s string) []byte {
	t.Helper()
	key, err := attempt.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestNewSecret(t *testing.T) {
	s, err := attempt.NewSecret(bytes.NewReader(bytes.Repeat([]byte{0xab}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	want := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xab}, 32))
	if s != want {
		t.Errorf("NewSecret = %q, want %q", s, want)
	}
	key, err := attempt.ParseSecret(s)
	if err != nil || !bytes.Equal(key, bytes.Repeat([]byte{0xab}, 32)) {
		t.Errorf("ParseSecret(NewSecret) = %x, %v", key, err)
	}
	if _, err := attempt.NewSecret(bytes.NewReader(make([]byte, 10))); err == nil {
		t.Error("NewSecret with a short random source: no error")
	}
	a, _ := attempt.NewSecret(rand.Reader)
	b, _ := attempt.NewSecret(rand.Reader)
	if a == b {
		t.Error("two NewSecret calls gave the same secret")
	}
}

func TestParseSecret(t *testing.T) {
	enc := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, n)) }
	tests := []struct {
		name string
		in   string
		size int // 0: refused
	}{
		{"spec", specSecret, 24},
		{"min", "whsec_" + enc(24), 24},
		{"default", "whsec_" + enc(32), 32},
		{"max", "whsec_" + enc(64), 64},
		{"too short", "whsec_" + enc(23), 0},
		{"too long", "whsec_" + enc(65), 0},
		{"no prefix", enc(32), 0},
		{"other prefix", "whpk_" + enc(32), 0},
		{"url encoding", "whsec_" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)), 0},
		{"not base64", "whsec_????", 0},
		{"empty", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := attempt.ParseSecret(tt.in)
			if tt.size == 0 {
				if !errors.Is(err, attempt.ErrInvalidSecret) {
					t.Fatalf("ParseSecret = %d bytes, %v; want ErrInvalidSecret", len(key), err)
				}
				if len(tt.in) > 8 && strings.Contains(err.Error(), tt.in[6:]) {
					t.Errorf("error %q repeats the secret", err)
				}
				return
			}
			if err != nil || len(key) != tt.size {
				t.Errorf("ParseSecret = %d bytes, %v; want %d bytes", len(key), err, tt.size)
			}
		})
	}
}

func TestSign(t *testing.T) {
	spec := attempt.Secret{Version: 1, Key: mustSecret(t, specSecret)}
	second := attempt.Secret{Version: 2, Key: bytes.Repeat([]byte("s"), 32)}
	seed := bytes.Repeat([]byte("e"), 32)
	ts := time.Unix(specTimestamp, 0)

	tests := []struct {
		name    string
		secrets []attempt.Secret
		seed    []byte
		parts   []string // version prefixes, in order
	}{
		{"one secret", []attempt.Secret{spec}, nil, []string{"v1,"}},
		{"rotation overlap", []attempt.Secret{second, spec}, nil, []string{"v1,", "v1,"}},
		{"ed25519 only", nil, seed, []string{"v1a,"}},
		{"both", []attempt.Secret{second, spec}, seed, []string{"v1,", "v1,", "v1a,"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, err := attempt.Sign(specID, ts, []byte(specBody), tt.secrets, tt.seed)
			if err != nil {
				t.Fatal(err)
			}
			fields := strings.Split(sig, " ")
			if len(fields) != len(tt.parts) {
				t.Fatalf("Sign = %q, want %d signatures", sig, len(tt.parts))
			}
			for i, p := range tt.parts {
				if !strings.HasPrefix(fields[i], p) {
					t.Errorf("signature %d = %q, want prefix %q", i, fields[i], p)
				}
			}

			h := http.Header{}
			h.Set("webhook-id", specID)
			h.Set("webhook-timestamp", strconv.FormatInt(specTimestamp, 10))
			h.Set("webhook-signature", sig)

			// Our verifier, with each key alone: every key must verify.
			for _, s := range tt.secrets {
				v := verify.Verifier{
					Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(s.Key)},
					Now:     func() time.Time { return ts },
				}
				if err := v.Verify(h, []byte(specBody)); err != nil {
					t.Errorf("verify with secret version %d: %v", s.Version, err)
				}
				// The independent reference implementation.
				wh, err := standardwebhooks.NewWebhookRaw(s.Key)
				if err != nil {
					t.Fatal(err)
				}
				if err := wh.VerifyIgnoringTimestamp([]byte(specBody), h); err != nil {
					t.Errorf("standard-webhooks library, secret version %d: %v", s.Version, err)
				}
			}
			if tt.seed != nil {
				v := verify.Verifier{
					PublicKeys: []string{attempt.PublicKey(tt.seed)},
					Now:        func() time.Time { return ts },
				}
				if err := v.Verify(h, []byte(specBody)); err != nil {
					t.Errorf("verify v1a: %v", err)
				}
			}
		})
	}
}

func TestSignSpecVector(t *testing.T) {
	got, err := attempt.Sign(specID, time.Unix(specTimestamp, 0), []byte(specBody),
		[]attempt.Secret{{Version: 1, Key: mustSecret(t, specSecret)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != specSignature {
		t.Errorf("Sign = %q, want the spec's %q", got, specSignature)
	}
}

func TestSignErrors(t *testing.T) {
	ts := time.Unix(specTimestamp, 0)
	key := attempt.Secret{Version: 1, Key: mustSecret(t, specSecret)}
	tests := []struct {
		name    string
		secrets []attempt.Secret
		seed    []byte
		want    error
	}{
		{"nothing", nil, nil, nil},
		{"short seed", []attempt.Secret{key}, make([]byte, 31), attempt.ErrInvalidSigningKey},
		{"empty key", []attempt.Secret{{Version: 4}}, nil, attempt.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := attempt.Sign(specID, ts, []byte(specBody), tt.secrets, tt.seed)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("Sign error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSigningKey(t *testing.T) {
	seed, err := attempt.NewSigningKey(bytes.NewReader(bytes.Repeat([]byte{7}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	pub := attempt.PublicKey(seed)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(pub, "whpk_"))
	if !strings.HasPrefix(pub, "whpk_") || err != nil || len(raw) != 32 {
		t.Errorf("PublicKey = %q, want whpk_ + base64 of 32 bytes", pub)
	}
	if _, err := attempt.NewSigningKey(bytes.NewReader(nil)); err == nil {
		t.Error("NewSigningKey with an empty random source: no error")
	}
}

func benchmarkSign(b *testing.B, size int, secrets int, seed []byte) {
	body := bytes.Repeat([]byte("x"), size)
	var keys []attempt.Secret
	for i := range secrets {
		keys = append(keys, attempt.Secret{Version: int32(i + 1), Key: bytes.Repeat([]byte{byte(i)}, 32)})
	}
	ts := time.Unix(specTimestamp, 0)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := attempt.Sign("dlv_0123456789abcdef", ts, body, keys, seed); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	seed := bytes.Repeat([]byte("e"), 32)
	b.Run("v1/1KiB", func(b *testing.B) { benchmarkSign(b, 1<<10, 1, nil) })
	b.Run("v1/64KiB", func(b *testing.B) { benchmarkSign(b, 64<<10, 1, nil) })
	b.Run("v1x2/1KiB", func(b *testing.B) { benchmarkSign(b, 1<<10, 2, nil) })
	b.Run("v1+v1a/1KiB", func(b *testing.B) { benchmarkSign(b, 1<<10, 1, seed) })
}
