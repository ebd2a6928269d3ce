package due

import (
	"fmt"
	"hash/maphash"
	"testing"
)

// TestSeenFilter: the filter never says a key it took is absent (the
// index would keep an item a plan replaces), answers "maybe" before it is
// built, and says most keys it never took are absent, up to the number of
// keys it was sized for; past that it asks to be built again.
func TestSeenFilter(t *testing.T) {
	var f seenFilter
	if !f.mayHave(reverseKey("d-1")) || !f.stale() {
		t.Fatal("an unbuilt filter must answer maybe and ask to be built")
	}
	var existing [][]byte
	var hashes []uint64
	for i := range 1000 {
		k := reverseKey(fmt.Sprint("old-", i))
		existing, hashes = append(existing, k), append(hashes, maphash.Bytes(seenSeed, k))
	}
	f.reset(hashes)
	for i := 0; i < minSeenKeys; i++ {
		f.add(reverseKey(fmt.Sprint("new-", i)))
		if i == minSeenKeys-1000-2 && f.stale() {
			t.Fatalf("stale after %d keys; want %d before a rebuild", 1000+i+1, minSeenKeys)
		}
	}
	if !f.stale() {
		t.Fatalf("%d keys taken, sized for %d: want a rebuild", f.added, f.limit)
	}
	for _, k := range existing {
		if !f.mayHave(k) {
			t.Fatalf("the filter lost %q, which it was built from", k)
		}
	}
	for i := 0; i < minSeenKeys; i++ {
		if k := reverseKey(fmt.Sprint("new-", i)); !f.mayHave(k) {
			t.Fatalf("the filter lost %q, which was added", k)
		}
	}
	maybe := 0
	const probes = 20000
	for i := range probes {
		if f.mayHave(reverseKey(fmt.Sprint("absent-", i))) {
			maybe++
		}
	}
	if rate := float64(maybe) / probes; rate > 0.03 {
		t.Fatalf("false positives %.2f %% at capacity; want under 3 %%", 100*rate)
	}
}
