package endpoint_test

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// TestReseal: after a reseal under a new master key, every live secret and
// the ed25519 seed open with the new key alone and are the very same, so
// signatures do not change; a second reseal writes nothing.
func TestReseal(t *testing.T) {
	oldKey, newKey := make([]byte, seal.KeySize), make([]byte, seal.KeySize)
	rand.Read(oldKey)
	rand.Read(newKey)
	krOld, _ := seal.NewKeyring(seal.Key{Secret: oldKey})
	krBoth, _ := seal.NewKeyring(seal.Key{Secret: newKey}, seal.Key{Secret: oldKey})
	krNew, _ := seal.NewKeyring(seal.Key{Secret: newKey})

	s, _ := newEndpoint(t, krOld)
	decideApply(t, s, cmd("acme", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{SignEd25519: true},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"sign_ed25519"}}}), env(krOld, t0, ""))
	decideApply(t, s, cmd("acme", &controlv1.RotateSecretRequest{}), env(krOld, t0, ""))
	before, err := s.LiveSecrets(krOld)
	if err != nil || len(before) != 2 {
		t.Fatalf("live secrets before: %d, %v", len(before), err)
	}
	pk, _ := s.PublicKey(krOld)
	if _, err := s.LiveSecrets(krNew); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("the new key alone opens the old secrets before a reseal: %v", err)
	}

	lagging := cmd("acme", nil)
	lagging.Command = &internalv1.EndpointCommand_Reseal{Reseal: &internalv1.Reseal{KeyId: krNew.CurrentID()}}
	var ge *command.Error
	if _, err := s.Decide("ep_1", lagging, env(krOld, t0, "")); !errors.As(err, &ge) || ge.Code != internalv1.GrainError_CODE_FAILED_PRECONDITION {
		t.Fatalf("a reseal under a key this node does not seal with: %v, want FAILED_PRECONDITION", err)
	}

	reseal := cmd("acme", nil)
	reseal.Command = &internalv1.EndpointCommand_Reseal{Reseal: &internalv1.Reseal{}}
	dec := decideApply(t, s, reseal, env(krBoth, t0, ""))
	if len(dec.Events) != 2 {
		t.Fatalf("reseal wrote %d events, want one per live secret (2)", len(dec.Events))
	}
	for _, ev := range dec.Events {
		r, ok := ev.(*hooklinev1.SecretResealed)
		if !ok || r.GetSecret().GetMasterKeyId() != krNew.CurrentID() {
			t.Fatalf("reseal wrote %T %v", ev, ev)
		}
	}
	after, err := s.LiveSecrets(krNew)
	if err != nil {
		t.Fatalf("live secrets under the new key alone: %v", err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("the secrets changed (-before +after):\n%s", diff)
	}
	if got, err := s.PublicKey(krNew); got != pk || err != nil {
		t.Fatalf("public key %q, %v; want %q", got, err, pk)
	}
	if dec := decideApply(t, s, reseal, env(krNew, t0, "")); len(dec.Events) != 0 {
		t.Fatalf("a second reseal wrote %d events", len(dec.Events))
	}
	other := cmd("globex", nil)
	other.Command = reseal.Command
	if _, err := s.Decide("ep_1", other, env(krNew, t0, "")); !errors.As(err, &ge) || ge.Code != internalv1.GrainError_CODE_NOT_FOUND {
		t.Fatalf("another tenant's reseal: %v, want NOT_FOUND", err)
	}
}
