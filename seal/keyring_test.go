package seal_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hookline/hookline/seal"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, seal.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	kr, err := seal.NewKeyring(seal.Key{Secret: newKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("whsec_very-secret")
	aad := seal.SecretAAD("ep_1", 1)
	id, nonce, ct, err := kr.Seal(plain, aad)
	if err != nil {
		t.Fatal(err)
	}
	if id != kr.CurrentID() || !strings.HasPrefix(id, "mk_") {
		t.Fatalf("key id = %q, current %q", id, kr.CurrentID())
	}
	if bytes.Contains(ct, plain) {
		t.Fatal("ciphertext contains the plaintext")
	}
	got, err := kr.Open(id, nonce, ct, aad)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}

	t.Run("moved to another endpoint", func(t *testing.T) {
		if _, err := kr.Open(id, nonce, ct, seal.SecretAAD("ep_2", 1)); !errors.Is(err, seal.ErrOpen) {
			t.Fatalf("err = %v, want ErrOpen", err)
		}
	})
	t.Run("moved to another version", func(t *testing.T) {
		if _, err := kr.Open(id, nonce, ct, seal.SecretAAD("ep_1", 2)); !errors.Is(err, seal.ErrOpen) {
			t.Fatalf("err = %v, want ErrOpen", err)
		}
	})
	t.Run("tampered", func(t *testing.T) {
		bad := bytes.Clone(ct)
		bad[0] ^= 1
		if _, err := kr.Open(id, nonce, bad, aad); !errors.Is(err, seal.ErrOpen) {
			t.Fatalf("err = %v, want ErrOpen", err)
		}
	})
	t.Run("unknown key", func(t *testing.T) {
		if _, err := kr.Open("mk_gone", nonce, ct, aad); !errors.Is(err, seal.ErrUnknownKey) {
			t.Fatalf("err = %v, want ErrUnknownKey", err)
		}
	})
	t.Run("nonces differ", func(t *testing.T) {
		_, n2, _, err := kr.Seal(plain, aad)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(nonce, n2) {
			t.Fatal("two seals used the same nonce")
		}
	})
}

func TestRotation(t *testing.T) {
	oldKey, newKey := newKey(t), newKey(t)
	before, err := seal.NewKeyring(seal.Key{ID: "k1", Secret: oldKey})
	if err != nil {
		t.Fatal(err)
	}
	id, nonce, ct, err := before.Seal([]byte("s"), []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := seal.NewKeyring(seal.Key{ID: "k2", Secret: newKey}, seal.Key{ID: "k1", Secret: oldKey})
	if err != nil {
		t.Fatal(err)
	}
	if after.CurrentID() != "k2" {
		t.Fatalf("current = %q", after.CurrentID())
	}
	if got, err := after.Open(id, nonce, ct, []byte("a")); err != nil || string(got) != "s" {
		t.Fatalf("old value under rotated keyring: %q, %v", got, err)
	}
	if id2, _, _, _ := after.Seal([]byte("s"), nil); id2 != "k2" {
		t.Fatalf("new seal under %q, want k2", id2)
	}
	shredded, err := seal.NewKeyring(seal.Key{ID: "k2", Secret: newKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shredded.Open(id, nonce, ct, []byte("a")); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("after shredding: %v, want ErrUnknownKey", err)
	}
}

func TestParseKeys(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	std := base64.StdEncoding.EncodeToString(k1)
	url := base64.RawURLEncoding.EncodeToString(k2)
	tests := []struct {
		name    string
		spec    string
		current string
		ids     int
		err     string
	}{
		{name: "bare", spec: std, current: seal.KeyID(k1), ids: 1},
		{name: "with id", spec: "prod-2025:" + std, current: "prod-2025", ids: 1},
		{name: "several", spec: "b:" + url + ", a:" + std, current: "b", ids: 2},
		{name: "bare older", spec: "b:" + url + "," + std, current: "b", ids: 2},
		{name: "empty entry", spec: std + ",,", err: "key 2 is empty"},
		{name: "short", spec: base64.StdEncoding.EncodeToString(k1[:16]), err: "key 1 is 16 bytes"},
		{name: "not base64", spec: "a:!!!", err: "key 1 is not base64"},
		{name: "duplicate id", spec: "a:" + std + ",a:" + url, err: `key 2: id "a" given twice`},
		{name: "bad id", spec: "a b:" + std, err: "must be 1 to 64 characters"},
		{name: "empty id", spec: ":" + std, err: "empty id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kr, err := seal.ParseKeys(tt.spec)
			if tt.err != "" {
				if !errors.Is(err, seal.ErrKey) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want ErrKey with %q", err, tt.err)
				}
				if strings.Contains(err.Error(), std) || strings.Contains(err.Error(), url) {
					t.Fatal("error message contains a key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if kr.CurrentID() != tt.current || len(kr.IDs()) != tt.ids {
				t.Fatalf("current %q ids %v", kr.CurrentID(), kr.IDs())
			}
			if s := fmt.Sprint(kr); strings.Contains(s, std) || strings.Contains(s, url) {
				t.Fatalf("String shows a key: %s", s)
			}
		})
	}
}

func TestKeyIDIsStable(t *testing.T) {
	k := newKey(t)
	if seal.KeyID(k) != seal.KeyID(bytes.Clone(k)) {
		t.Fatal("KeyID not deterministic")
	}
	if seal.KeyID(k) == seal.KeyID(newKey(t)) {
		t.Fatal("two keys share an id")
	}
}
