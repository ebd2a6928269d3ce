package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hookline/hookline/cluster"
)

func TestConfigValidate(t *testing.T) {
	props := actor.PropsFromFunc(func(actor.Context) {})
	tests := []struct {
		name    string
		cfg     cluster.Config
		wantErr string // substring; empty means valid
	}{
		{name: "zero value", cfg: cluster.Config{}},
		{name: "any ports", cfg: cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort}},
		{name: "unspecified host", cfg: cluster.Config{Host: "0.0.0.0"}, wantErr: "Host"},
		{name: "port out of range", cfg: cluster.Config{Port: 70000}, wantErr: "Port 70000"},
		{name: "gossip port negative", cfg: cluster.Config{GossipPort: -2}, wantErr: "GossipPort"},
		{name: "negative timeout", cfg: cluster.Config{RequestTimeout: -time.Second}, wantErr: "RequestTimeout"},
		{name: "nil kind", cfg: cluster.Config{Kinds: []*pcluster.Kind{nil}}, wantErr: "Kinds[0] is nil"},
		{name: "unnamed kind", cfg: cluster.Config{Kinds: []*pcluster.Kind{pcluster.NewKind("", props)}}, wantErr: "no name"},
		{name: "duplicate kind", cfg: cluster.Config{Kinds: []*pcluster.Kind{pcluster.NewKind("a", props), pcluster.NewKind("a", props)}}, wantErr: "repeats"},
		{name: "reserved kind", cfg: cluster.Config{Kinds: []*pcluster.Kind{pcluster.NewKind(pcluster.TopicActorKind, props)}}, wantErr: "reserved"},
		{name: "seed without port", cfg: cluster.Config{Seeds: []string{"10.0.0.1"}}, wantErr: "Seeds[0]"},
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
