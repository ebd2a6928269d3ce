package eventstest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hookline/hookline/events"
)

// testVault checks a log's data-key vault, when it keeps one: first put
// wins (also when racing), replace is compare-and-swap, destroy takes only
// the named key and is idempotent, a new key follows a destroyed one, and
// nothing of it reaches the log.
func testVault(e *env) {
	v, ok := e.log.(events.Vault)
	if !ok {
		e.Skip("this log keeps no vault")
	}
	tenant := "vault" + randomHex(6)
	secret := func(label string) []byte { return []byte("sealed-" + label + "-" + tenant) }
	if _, err := v.DataKey(e.ctx, tenant); !errors.Is(err, events.ErrNoDataKey) {
		e.Fatalf("DataKey of a tenant without one: %v, want ErrNoDataKey", err)
	}
	k1 := events.DataKey{TenantID: tenant, ID: "dk_1", Sealed: secret("1")}
	if got, err := v.PutDataKey(e.ctx, k1); err != nil || got.ID != "dk_1" || !bytes.Equal(got.Sealed, k1.Sealed) {
		e.Fatalf("PutDataKey: %+v, %v", got, err)
	}
	if got, err := v.PutDataKey(e.ctx, events.DataKey{TenantID: tenant, ID: "dk_2", Sealed: secret("2")}); err != nil || got.ID != "dk_1" {
		e.Fatalf("a second PutDataKey: %+v, %v; want the first key kept", got, err)
	}

	racing := tenant + "r"
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			got, err := v.PutDataKey(e.ctx, events.DataKey{TenantID: racing, ID: "dk_r" + string(rune('a'+i)), Sealed: secret("r")})
			if err != nil {
				e.Errorf("racing PutDataKey: %v", err)
			}
			ids[i] = got.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			e.Fatalf("racing puts got different keys: %v", ids)
		}
	}

	listed, err := v.DataKeys(e.ctx)
	if err != nil {
		e.Fatal(err)
	}
	found := 0
	for _, k := range listed {
		if k.TenantID == tenant || k.TenantID == racing {
			found++
		}
	}
	if found != 2 {
		e.Fatalf("DataKeys lists %d of the case's 2 keys: %+v", found, listed)
	}

	k1b := events.DataKey{TenantID: tenant, ID: "dk_1", Sealed: secret("1b")}
	if err := v.ReplaceDataKey(e.ctx, events.DataKey{TenantID: tenant, ID: "dk_1", Sealed: secret("stale")}, k1b); !errors.Is(err, events.ErrDataKeyChanged) {
		e.Fatalf("ReplaceDataKey of a stale key: %v, want ErrDataKeyChanged", err)
	}
	if err := v.ReplaceDataKey(e.ctx, k1, k1b); err != nil {
		e.Fatal(err)
	}
	if got, err := v.DataKey(e.ctx, tenant); err != nil || !bytes.Equal(got.Sealed, k1b.Sealed) {
		e.Fatalf("after ReplaceDataKey: %+v, %v", got, err)
	}

	if err := v.DestroyDataKey(e.ctx, tenant, "dk_other"); err != nil {
		e.Fatal(err)
	}
	if _, err := v.DataKey(e.ctx, tenant); err != nil {
		e.Fatalf("destroying another id took the key: %v", err)
	}
	for range 2 {
		if err := v.DestroyDataKey(e.ctx, tenant, "dk_1"); err != nil {
			e.Fatalf("DestroyDataKey: %v", err)
		}
	}
	if _, err := v.DataKey(e.ctx, tenant); !errors.Is(err, events.ErrNoDataKey) {
		e.Fatalf("DataKey after DestroyDataKey: %v, want ErrNoDataKey", err)
	}
	if got, err := v.PutDataKey(e.ctx, events.DataKey{TenantID: tenant, ID: "dk_3", Sealed: secret("3")}); err != nil || got.ID != "dk_3" {
		e.Fatalf("PutDataKey after a destroy: %+v, %v", got, err)
	}

	testVaultKEK(e, v, tenant)

	for pos := events.Start; ; {
		recs, err := e.log.ReadAll(e.ctx, pos, 1000)
		if err != nil {
			e.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if bytes.Contains(r.Data, []byte(tenant)) || bytes.Contains(r.Metadata, []byte(tenant)) {
				e.Fatalf("the log holds the vault's bytes in %s", r.Stream)
			}
		}
		pos = recs[len(recs)-1].Position
	}
}

// testVaultKEK checks the vault's key-encryption key: none at first; a
// data key is stored only under the current one; SetKEK is
// compare-and-swap, and once it returns no data key is stored under the
// old one, even by a put that raced it; ReplaceDataKey compares the KEK
// too, and rewraps under the current one only.
func testVaultKEK(e *env, v events.Vault, tenant string) {
	if kek, err := v.KEK(e.ctx); err != nil || kek != "" {
		e.Fatalf("the KEK of a new vault: %q, %v; want none", kek, err)
	}
	under := func(id, kek string) events.DataKey {
		return events.DataKey{TenantID: tenant + id, ID: "dk_" + id, KEK: kek, Sealed: []byte("wrapped-" + id)}
	}
	if _, err := v.PutDataKey(e.ctx, under("k1", "kek_1")); !errors.Is(err, events.ErrKEKChanged) {
		e.Fatalf("a key under a KEK that is not the current one: %v, want ErrKEKChanged", err)
	}
	if err := v.SetKEK(e.ctx, "kek_other", "kek_1"); !errors.Is(err, events.ErrKEKChanged) {
		e.Fatalf("SetKEK from a KEK that is not the current one: %v, want ErrKEKChanged", err)
	}
	if err := v.SetKEK(e.ctx, "", "kek_1"); err != nil {
		e.Fatal(err)
	}
	if kek, err := v.KEK(e.ctx); err != nil || kek != "kek_1" {
		e.Fatalf("the KEK after SetKEK: %q, %v", kek, err)
	}
	if _, err := v.PutDataKey(e.ctx, under("k0", "")); !errors.Is(err, events.ErrKEKChanged) {
		e.Fatalf("a key under the old KEK: %v, want ErrKEKChanged", err)
	}
	k1 := under("k1", "kek_1")
	if got, err := v.PutDataKey(e.ctx, k1); err != nil || got.KEK != "kek_1" {
		e.Fatalf("a key under the current KEK: %+v, %v", got, err)
	}
	// Puts under kek_1 race the switch to kek_2: those stored are all
	// there when SetKEK returns, and none is stored after.
	var wg sync.WaitGroup
	switched := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			if i == 8 {
				if err := v.SetKEK(e.ctx, "kek_1", "kek_2"); err != nil {
					e.Errorf("SetKEK: %v", err)
				}
				close(switched)
			}
			if _, err := v.PutDataKey(e.ctx, under(fmt.Sprint("race", i), "kek_1")); err != nil && !errors.Is(err, events.ErrKEKChanged) {
				e.Errorf("a racing PutDataKey: %v", err)
			}
		})
	}
	<-switched
	underOld := func() []string {
		keys, err := v.DataKeys(e.ctx)
		if err != nil {
			e.Fatal(err)
		}
		var ids []string
		for _, k := range keys {
			if k.KEK == "kek_1" {
				ids = append(ids, k.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	atSwitch := underOld()
	wg.Wait()
	if after := underOld(); !slices.Equal(after, atSwitch) {
		e.Fatalf("keys stored under the old KEK after SetKEK returned: %v, then %v", atSwitch, after)
	}

	rewrapped := func(kek string) events.DataKey {
		return events.DataKey{TenantID: k1.TenantID, ID: k1.ID, KEK: kek, Sealed: []byte("rewrapped-" + kek)}
	}
	if err := v.ReplaceDataKey(e.ctx, events.DataKey{TenantID: k1.TenantID, ID: k1.ID, KEK: "kek_0", Sealed: k1.Sealed}, rewrapped("kek_2")); !errors.Is(err, events.ErrDataKeyChanged) {
		e.Fatalf("ReplaceDataKey of a key named under another KEK: %v, want ErrDataKeyChanged", err)
	}
	if err := v.ReplaceDataKey(e.ctx, k1, rewrapped("kek_1")); !errors.Is(err, events.ErrKEKChanged) {
		e.Fatalf("ReplaceDataKey under a KEK that is no longer current: %v, want ErrKEKChanged", err)
	}
	if err := v.ReplaceDataKey(e.ctx, k1, rewrapped("kek_2")); err != nil {
		e.Fatal(err)
	}
	if got, err := v.DataKey(e.ctx, k1.TenantID); err != nil || got.KEK != "kek_2" || !bytes.Equal(got.Sealed, rewrapped("kek_2").Sealed) {
		e.Fatalf("the key rewrapped: %+v, %v", got, err)
	}
}

// testDropStreams checks a log's StreamDropper, when it has one: the
// named event and delivery streams are gone, whatever their age; a tenant
// stream named with them and a stream not named are kept.
func testDropStreams(e *env) {
	d, ok := e.log.(events.StreamDropper)
	if !ok {
		e.Skip("this log drops streams only by its retention")
	}
	tenant := "drop" + randomHex(6)
	doomed := []string{events.EventStream(tenant, "e1"), events.DeliveryStream(tenant + "_d1")}
	kept := []string{events.TenantStream(tenant), events.DeliveryStream(tenant + "_d2")}
	for _, s := range append(slices.Clone(doomed), kept...) {
		e.mustAppend(s, events.NoStream{}, newEvents(2, "T")...)
	}
	n, err := d.DropStreams(e.ctx, append(slices.Clone(doomed), kept[0]))
	if err != nil || n != 2 {
		e.Fatalf("DropStreams: %d, %v; want the 2 expiring streams dropped", n, err)
	}
	for _, s := range doomed {
		if _, err := e.log.ReadStream(e.ctx, s, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
			e.Fatalf("%s after DropStreams: %v, want ErrStreamNotFound", s, err)
		}
	}
	for _, s := range kept {
		if recs, err := e.log.ReadStream(e.ctx, s, events.Forwards, 0, 10); err != nil || len(recs) != 2 {
			e.Fatalf("%s after DropStreams: %d records, %v; want it kept", s, len(recs), err)
		}
	}
}
