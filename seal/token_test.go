package seal_test

import (
	"bytes"
	"testing"

	"github.com/hookline/hookline/seal"
)

// TestToken: a token is the same for the same tenant and parts on every
// node sharing the vault, differs for other parts or tenants, and, once
// the tenant's data key is erased, the same parts give another token
// under the next key: nothing links the old one to them. Without a vault
// it is a plain digest.
func TestToken(t *testing.T) {
	vault := memVault(t)
	kr := parsed(t, masterA)
	marks := &erasedSet{ids: map[string]bool{}}
	one, two := seal.NewPayloads(vault, kr, marks.erased), seal.NewPayloads(vault, kr, marks.erased)
	ctx := t.Context()
	token := func(p *seal.Payloads, tenant string, parts ...string) ([]byte, string) {
		t.Helper()
		tok, key, err := p.Token(ctx, tenant, parts...)
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != seal.TokenSize {
			t.Fatalf("token of %d bytes, want %d", len(tok), seal.TokenSize)
		}
		return tok, key
	}
	a, keyA := token(one, "acme", "ep_1", "cus_7")
	if b, keyB := token(two, "acme", "ep_1", "cus_7"); !bytes.Equal(a, b) || keyA != keyB || keyA == "" {
		t.Errorf("two nodes: tokens %x (%s) and %x (%s), want the same under one data key", a, keyA, b, keyB)
	}
	for _, other := range [][]string{{"ep_1", "cus_8"}, {"ep_2", "cus_7"}, {"ep_1cus_7"}} {
		if b, _ := token(one, "acme", other...); bytes.Equal(a, b) {
			t.Errorf("parts %q give the token of ep_1, cus_7", other)
		}
	}
	if b, _ := token(one, "globex", "ep_1", "cus_7"); bytes.Equal(a, b) {
		t.Errorf("another tenant's parts give the same token")
	}

	marks.add(keyA)
	if err := one.Destroy(ctx, "acme", keyA); err != nil {
		t.Fatal(err)
	}
	if b, keyB := token(two, "acme", "ep_1", "cus_7"); bytes.Equal(a, b) || keyB == keyA {
		t.Errorf("after the erasure: token %x under %s, want another one under a new key", b, keyB)
	}

	var none *seal.Payloads
	d1, key := token(none, "acme", "ep_1", "cus_7")
	if d2, _ := token(none, "acme", "ep_1", "cus_7"); !bytes.Equal(d1, d2) || key != "" {
		t.Errorf("without a vault: %x and %x under %q, want one digest and no key", d1, d2, key)
	}
}
