package confcheck

import (
	"testing"
	"time"
)

func TestAllNamesTheConfigAndEachField(t *testing.T) {
	err := All("demo config",
		NotNegative("retention", -time.Second),
		NotNegative("budget", 3),
		NotNegative("size", -2),
	)
	want := "demo config: retention -1s is negative\nsize -2 is negative"
	if err == nil || err.Error() != want {
		t.Fatalf("All = %v, want %q", err, want)
	}
}

func TestAllPassesZeroAndPositive(t *testing.T) {
	if err := All("demo config", nil, NotNegative("every", time.Duration(0)), NotNegative("budget", 1)); err != nil {
		t.Fatalf("All = %v, want nil", err)
	}
}
