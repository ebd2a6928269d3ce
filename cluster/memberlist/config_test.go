package memberlist_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/cluster/memberlist"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     memberlist.Config
		wantErr string // substring; empty means valid
	}{
		{name: "zero value", cfg: memberlist.Config{}},
		{name: "any port with seeds", cfg: memberlist.Config{Port: memberlist.AnyPort, Seeds: []string{"127.0.0.1:7946"}}},
		{name: "unspecified host", cfg: memberlist.Config{Host: "::"}, wantErr: "Host"},
		{name: "port out of range", cfg: memberlist.Config{Port: 65536}, wantErr: "Port"},
		{name: "seed without port", cfg: memberlist.Config{Seeds: []string{"node-a"}}, wantErr: "Seeds[0]"},
		{name: "cluster name too long", cfg: memberlist.Config{ClusterName: strings.Repeat("x", 300)}, wantErr: "ClusterName"},
		{name: "negative timing", cfg: memberlist.Config{Timing: memberlist.Timing{ProbeInterval: -time.Second}}, wantErr: "Timing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error naming %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	if _, err := memberlist.New(memberlist.Config{Port: -5}); err == nil {
		t.Fatal("New accepted Port -5")
	}
}
