package endpoint_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// TestSecretHeaders: a secret header's value is sealed in the event that
// sets it, never shown on reads, sent with the plain headers, kept by an
// update that does not name it, replaced by one that does, and resealed
// under a new master key like the signing secrets.
func TestSecretHeaders(t *testing.T) {
	oldKey, newKey := make([]byte, seal.KeySize), make([]byte, seal.KeySize)
	rand.Read(oldKey)
	rand.Read(newKey)
	krOld, _ := seal.NewKeyring(seal.Key{Secret: oldKey})
	krBoth, _ := seal.NewKeyring(seal.Key{Secret: newKey}, seal.Key{Secret: oldKey})
	krNew, _ := seal.NewKeyring(seal.Key{Secret: newKey})
	update := func(s *controlv1.EndpointSettings, paths ...string) *internalv1.EndpointCommand {
		return cmd("acme", &controlv1.UpdateEndpointRequest{Settings: s, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
	}

	s, _ := newEndpoint(t, krOld)
	const token = "Bearer tok-5f3a9c"
	dec := decideApply(t, s, update(&controlv1.EndpointSettings{
		Headers:       map[string]string{"X-Region": "eu"},
		SecretHeaders: map[string]string{"Authorization": token},
	}, "headers", "secret_headers"), env(krOld, t0, ""))
	for _, ev := range dec.Events {
		b, _ := proto.Marshal(ev)
		if bytes.Contains(b, []byte("tok-5f3a9c")) {
			t.Fatalf("%T holds the secret header's value in clear", ev)
		}
	}
	want := map[string]string{"X-Region": "eu", "Authorization": token}
	if got, err := s.Headers(krOld); err != nil || !cmp.Equal(got, want) {
		t.Fatalf("headers sent = %v, %v; want %v", got, err, want)
	}
	if v := s.Settings(); len(v.GetSecretHeaders()) != 0 || !cmp.Equal(v.GetSecretHeaderNames(), []string{"Authorization"}) {
		t.Fatalf("the read shows secret headers %v, names %v; want no value and the name", v.GetSecretHeaders(), v.GetSecretHeaderNames())
	}

	// An update that does not name them keeps them; naming them with the
	// same values changes nothing; a new value replaces the old.
	decideApply(t, s, update(&controlv1.EndpointSettings{Description: "billing"}, "description"), env(krOld, t0, ""))
	if got, _ := s.Headers(krOld); got["Authorization"] != token {
		t.Fatalf("an update of the description lost the secret header: %v", got)
	}
	same := update(&controlv1.EndpointSettings{SecretHeaders: map[string]string{"Authorization": token}}, "secret_headers")
	if dec := decideApply(t, s, same, env(krOld, t0, "")); len(dec.Events) != 0 {
		t.Fatalf("setting the same secret header wrote %d events, want none", len(dec.Events))
	}
	decideApply(t, s, update(&controlv1.EndpointSettings{SecretHeaders: map[string]string{"Authorization": "Bearer tok-2"}}, "secret_headers"), env(krOld, t0, ""))
	if got, _ := s.Headers(krOld); got["Authorization"] != "Bearer tok-2" {
		t.Fatalf("after the replacement the header is %q", got["Authorization"])
	}

	// The same name in both sets, or one Hookline sets, is refused.
	var ge *command.Error
	_, err := s.Decide("ep_1", update(&controlv1.EndpointSettings{Headers: map[string]string{"Authorization": "x"}}, "headers"), env(krOld, t0, ""))
	if !errors.As(err, &ge) || ge.Code != internalv1.GrainError_CODE_INVALID_ARGUMENT || !strings.Contains(err.Error(), "settings.secret_headers") {
		t.Errorf("the same name in headers and secret_headers: %v, want INVALID_ARGUMENT on settings.secret_headers", err)
	}
	_, err = s.Decide("ep_1", update(&controlv1.EndpointSettings{SecretHeaders: map[string]string{"webhook-signature": "x"}}, "secret_headers"), env(krOld, t0, ""))
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), "settings.secret_headers") {
		t.Errorf("a secret header named like Hookline's: %v, want INVALID_ARGUMENT on settings.secret_headers", err)
	}

	reseal := cmd("acme", nil)
	reseal.Command = &internalv1.EndpointCommand_Reseal{Reseal: &internalv1.Reseal{}}
	dec = decideApply(t, s, reseal, env(krBoth, t0, ""))
	resealed := 0
	for _, ev := range dec.Events {
		if _, ok := ev.(*hooklinev1.HeadersResealed); ok {
			resealed++
		}
	}
	if resealed != 1 {
		t.Fatalf("reseal wrote %d HeadersResealed, want 1", resealed)
	}
	if got, err := s.Headers(krNew); err != nil || got["Authorization"] != "Bearer tok-2" {
		t.Fatalf("after the reseal the new key alone opens %v, %v", got, err)
	}
	if dec := decideApply(t, s, reseal, env(krBoth, t0, "")); len(dec.Events) != 0 {
		t.Fatalf("a second reseal wrote %d events, want none", len(dec.Events))
	}
}
