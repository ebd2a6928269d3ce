package verify_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/verify"
)

// FuzzVerify checks the verifier against the Standard Webhooks reference
// library on arbitrary headers and bodies: it never accepts what the
// reference refuses (it may be stricter: canonical timestamps, exactly two
// fields per entry), and it always accepts a reference signature placed
// among arbitrary space-separated entries. The seed corpus in
// testdata/fuzz/FuzzVerify holds the tricky cases of TestVerify.
func FuzzVerify(f *testing.F) {
	ref, err := standardwebhooks.NewWebhook(specSecret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, ts, sigs string, body []byte) {
		h := http.Header{}
		h.Set(verify.HeaderID, id)
		h.Set(verify.HeaderTimestamp, ts)
		h.Set(verify.HeaderSignature, sigs)
		// The timestamp is never too old or too new: the tolerance is the
		// reference's business to skip, and ours to pass.
		now := time.Unix(0, 0)
		if n, err := strconv.ParseInt(ts, 10, 64); err == nil {
			now = time.Unix(n, 0)
		}
		v := verify.Verifier{Secrets: []string{specSecret}, Now: func() time.Time { return now }}

		ours := v.Verify(h, body)
		theirs := ref.VerifyIgnoringTimestamp(body, h)
		if ours == nil && theirs != nil {
			t.Fatalf("accepted what the reference refuses (%v): id=%q ts=%q sigs=%q", theirs, id, ts, sigs)
		}

		// A valid signature among the fuzzed entries is found, whatever
		// surrounds it, as long as the id and timestamp are well formed.
		if id == "" || strings.ContainsAny(id, "\r\n") || !canonical(ts) {
			return
		}
		good, err := ref.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		h.Set(verify.HeaderSignature, sigs+" "+good)
		if err := v.Verify(h, body); err != nil {
			t.Fatalf("refused a reference signature after %q: %v", sigs, err)
		}
	})
}

// canonical reports whether ts is a Unix time in canonical decimal.
func canonical(ts string) bool {
	n, err := strconv.ParseInt(ts, 10, 64)
	return err == nil && n >= 0 && strconv.FormatInt(n, 10) == ts
}
