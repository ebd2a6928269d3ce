package esdb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/events/esdb"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  esdb.Config
		want string // a part of the error; "" for valid
	}{
		{"zero value means defaults", esdb.Config{}, ""},
		{"insecure single node", esdb.Config{ConnectionString: "kurrentdb://localhost:2113?tls=false"}, ""},
		{"esdb scheme and cluster", esdb.Config{ConnectionString: "esdb://admin:changeit@a:2113,b:2113?tls=true"}, ""},
		{"bad scheme", esdb.Config{ConnectionString: "http://localhost:2113"}, "Config.ConnectionString"},
		{"negative size", esdb.Config{MaxEventSize: -1}, "Config.MaxEventSize"},
		{"negative retention", esdb.Config{Retention: -time.Hour}, "Config.Retention"},
		{"sub-second retention", esdb.Config{Retention: time.Millisecond}, "at least 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestConfigErrorHidesPassword(t *testing.T) {
	err := esdb.Config{ConnectionString: "ftp://admin:s3cret@localhost:2113"}.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want an error")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Validate() = %v, leaks the password", err)
	}
}
