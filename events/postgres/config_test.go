package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/events/postgres"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  postgres.Config
		want string // in the error; "" for valid
	}{
		{"Zero", postgres.Config{}, ""},
		{"URL", postgres.Config{DSN: "postgres://u:p@127.0.0.1:5432/db?sslmode=disable&pool_max_conns=8"}, ""},
		{"KeyValue", postgres.Config{DSN: "host=127.0.0.1 dbname=db"}, ""},
		{"BadDSN", postgres.Config{DSN: "postgres://u:secret@127.0.0.1:notaport/db"}, "Config.DSN"},
		{"BadKeyValue", postgres.Config{DSN: "host=127.0.0.1 password=secret port=x"}, "Config.DSN"},
		{"BadSchema", postgres.Config{Schema: "Hook-Line"}, "Config.Schema"},
		{"LongSchema", postgres.Config{Schema: strings.Repeat("a", 49)}, "Config.Schema"},
		{"NegativeMaxEventSize", postgres.Config{MaxEventSize: -1}, "Config.MaxEventSize"},
		{"NegativeRetention", postgres.Config{Retention: -time.Hour}, "Config.Retention"},
		{"TinyPartitions", postgres.Config{PartitionEvery: time.Second}, "Config.PartitionEvery"},
		{"NegativeMaintainEvery", postgres.Config{MaintainEvery: -1}, "Config.MaintainEvery"},
		{"NegativePollEvery", postgres.Config{PollEvery: -1}, "Config.PollEvery"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate() = %v, want an error naming %s", err, c.want)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Errorf("Validate() = %v: the password leaks", err)
			}
		})
	}
}
