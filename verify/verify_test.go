package verify_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

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

const otherSecret = "whsec_c2VjcmV0LXR3by1mb3ItdGVzdHMtb25seS0xMjM0NTY="

func headers(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(verify.HeaderID, id)
	h.Set(verify.HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(verify.HeaderSignature, sig)
	return h
}

func clock(unix int64) func() time.Time {
	return func() time.Time { return time.Unix(unix, 0) }
}

// referenceSign signs with the independent Standard Webhooks library.
func referenceSign(t *testing.T, secret, id string, ts int64, body string) string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, time.Unix(ts, 0), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func ed25519Sign(seed []byte, id string, ts int64, body string) string {
	msg := id + "." + strconv.FormatInt(ts, 10) + "." + body
	sig := ed25519.Sign(ed25519.NewKeyFromSeed(seed), []byte(msg))
	return "v1a," + base64.StdEncoding.EncodeToString(sig)
}

func publicKey(seed []byte) string {
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return "whpk_" + base64.StdEncoding.EncodeToString(pub)
}

func TestVerify(t *testing.T) {
	seed := []byte(strings.Repeat("k", ed25519.SeedSize))
	otherSeed := []byte(strings.Repeat("o", ed25519.SeedSize))
	refSig := referenceSign(t, specSecret, specID, specTimestamp, specBody)
	otherSig := referenceSign(t, otherSecret, specID, specTimestamp, specBody)

	tests := []struct {
		name     string
		verifier verify.Verifier
		headers  http.Header
		body     string
		want     error
	}{
		{
			name:     "spec vector",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, specSignature),
			body:     specBody,
		},
		{
			name:     "secret without prefix",
			verifier: verify.Verifier{Secrets: []string{strings.TrimPrefix(specSecret, "whsec_")}},
			headers:  headers(specID, specTimestamp, specSignature),
			body:     specBody,
		},
		{
			name:     "reference library signature",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, refSig),
			body:     specBody,
		},
		{
			name:     "second of several signatures",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, otherSig+" "+refSig),
			body:     specBody,
		},
		{
			name:     "rotation: old signature, both secrets",
			verifier: verify.Verifier{Secrets: []string{otherSecret, specSecret}},
			headers:  headers(specID, specTimestamp, refSig),
			body:     specBody,
		},
		{
			name:     "unknown versions and junk skipped",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, "v9,abc nocomma v1,!!! "+refSig),
			body:     specBody,
		},
		{
			name:     "tab-separated list",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, otherSig+"\t"+refSig),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "newline-separated list",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, otherSig+"\n"+refSig),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "double space between signatures",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, otherSig+"  "+refSig),
			body:     specBody,
		},
		{
			name:     "newline inside the base64",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, specSignature[:10]+"\n"+specSignature[10:]),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "non-canonical base64 (unused bits set)",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			// The MAC's last base64 character before '=' carries two unused
			// bits; 'E' -> 'F' sets one and decodes to the same bytes.
			headers: headers(specID, specTimestamp, strings.Replace(specSignature, "1OE=", "1OF=", 1)),
			body:    specBody,
			want:    verify.ErrNoMatchingSignature,
		},
		{
			name:     "trailing field after the signature",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, specSignature+",x"),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "timestamp with a plus sign",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers: func() http.Header {
				h := headers(specID, specTimestamp, specSignature)
				h.Set(verify.HeaderTimestamp, "+"+strconv.Itoa(specTimestamp))
				return h
			}(),
			body: specBody,
			want: verify.ErrInvalidTimestamp,
		},
		{
			name:     "timestamp with a leading zero",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers: func() http.Header {
				h := headers(specID, specTimestamp, specSignature)
				h.Set(verify.HeaderTimestamp, "0"+strconv.Itoa(specTimestamp))
				return h
			}(),
			body: specBody,
			want: verify.ErrInvalidTimestamp,
		},
		{
			name:     "ed25519",
			verifier: verify.Verifier{PublicKeys: []string{publicKey(seed)}},
			headers:  headers(specID, specTimestamp, ed25519Sign(seed, specID, specTimestamp, specBody)),
			body:     specBody,
		},
		{
			name:     "ed25519 beside v1",
			verifier: verify.Verifier{Secrets: []string{otherSecret}, PublicKeys: []string{publicKey(seed)}},
			headers:  headers(specID, specTimestamp, refSig+" "+ed25519Sign(seed, specID, specTimestamp, specBody)),
			body:     specBody,
		},
		{
			name:     "ed25519 wrong key",
			verifier: verify.Verifier{PublicKeys: []string{publicKey(otherSeed)}},
			headers:  headers(specID, specTimestamp, ed25519Sign(seed, specID, specTimestamp, specBody)),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "v1 signature under v1a",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, "v1a,"+strings.TrimPrefix(specSignature, "v1,")),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "tampered body",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, specSignature),
			body:     `{"test": 2432232315}`,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "other id",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers("msg_other", specTimestamp, specSignature),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "wrong secret",
			verifier: verify.Verifier{Secrets: []string{otherSecret}},
			headers:  headers(specID, specTimestamp, specSignature),
			body:     specBody,
			want:     verify.ErrNoMatchingSignature,
		},
		{
			name:     "missing id",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers("", specTimestamp, specSignature),
			body:     specBody,
			want:     verify.ErrMissingHeaders,
		},
		{
			name:     "missing signature",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  headers(specID, specTimestamp, ""),
			body:     specBody,
			want:     verify.ErrMissingHeaders,
		},
		{
			name:     "no headers",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers:  http.Header{},
			body:     specBody,
			want:     verify.ErrMissingHeaders,
		},
		{
			name:     "timestamp not a number",
			verifier: verify.Verifier{Secrets: []string{specSecret}},
			headers: func() http.Header {
				h := headers(specID, specTimestamp, specSignature)
				h.Set(verify.HeaderTimestamp, "2021-02-25T15:02:10Z")
				return h
			}(),
			body: specBody,
			want: verify.ErrInvalidTimestamp,
		},
		{
			name:     "bad secret",
			verifier: verify.Verifier{Secrets: []string{"whsec_not base64"}},
			headers:  headers(specID, specTimestamp, specSignature),
			body:     specBody,
			want:     verify.ErrInvalidKey,
		},
		{
			name:     "bad public key",
			verifier: verify.Verifier{PublicKeys: []string{"whpk_AAAA"}},
			headers:  headers(specID, specTimestamp, specSignature),
			body:     specBody,
			want:     verify.ErrInvalidKey,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.verifier
			v.Now = clock(specTimestamp)
			err := v.Verify(tt.headers, []byte(tt.body))
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyTolerance(t *testing.T) {
	tests := []struct {
		name      string
		tolerance time.Duration
		skew      int64 // receiver clock minus timestamp, seconds
		want      error
	}{
		{"same second", 0, 0, nil},
		{"default old edge", 0, 300, nil},
		{"default too old", 0, 301, verify.ErrTimestampTooOld},
		{"default new edge", 0, -300, nil},
		{"default too new", 0, -301, verify.ErrTimestampTooNew},
		{"custom old edge", time.Minute, 60, nil},
		{"custom too old", time.Minute, 61, verify.ErrTimestampTooOld},
		{"custom too new", time.Minute, -61, verify.ErrTimestampTooNew},
		{"replay a day later", 0, 86400, verify.ErrTimestampTooOld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := verify.Verifier{
				Secrets:   []string{specSecret},
				Tolerance: tt.tolerance,
				Now:       clock(specTimestamp + tt.skew),
			}
			err := v.Verify(headers(specID, specTimestamp, specSignature), []byte(specBody))
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("Verify with skew %d s = %v, want %v", tt.skew, err, tt.want)
			}
		})
	}
}

// TestReferenceLibraryAgrees checks the other direction: what the
// spec vector signs, the reference library verifies too, so both agree.
func TestReferenceLibraryAgrees(t *testing.T) {
	wh, err := standardwebhooks.NewWebhook(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := headers(specID, specTimestamp, specSignature)
	if err := wh.VerifyIgnoringTimestamp([]byte(specBody), h); err != nil {
		t.Fatalf("reference library rejects the spec vector: %v", err)
	}
}

func TestNewAndValidate(t *testing.T) {
	tests := []struct {
		name string
		v    verify.Verifier
		ok   bool
	}{
		{"secret", verify.Verifier{Secrets: []string{specSecret}}, true},
		{"public key", verify.Verifier{PublicKeys: []string{publicKey(make([]byte, 32))}}, true},
		{"nothing", verify.Verifier{}, false},
		{"empty secret", verify.Verifier{Secrets: []string{"whsec_"}}, false},
		{"negative tolerance", verify.Verifier{Secrets: []string{specSecret}, Tolerance: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if _, err := verify.New(specSecret, otherSecret); err != nil {
		t.Errorf("New: %v", err)
	}
	_, err := verify.New("whsec_%%%")
	if !errors.Is(err, verify.ErrInvalidKey) {
		t.Errorf("New(bad) = %v, want ErrInvalidKey", err)
	}
	if err != nil && strings.Contains(err.Error(), "%%%") {
		t.Errorf("error %q repeats the secret", err)
	}
}

func BenchmarkVerify(b *testing.B) {
	v := verify.Verifier{Secrets: []string{specSecret}, Now: clock(specTimestamp)}
	h := headers(specID, specTimestamp, specSignature)
	body := []byte(specBody)
	for b.Loop() {
		if err := v.Verify(h, body); err != nil {
			b.Fatal(err)
		}
	}
}
