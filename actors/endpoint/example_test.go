package endpoint_test

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

func ExampleApplyMask() {
	current := &controlv1.EndpointSettings{Url: "https://hooks.example.com/in", EventTypes: []string{"invoice.paid"}, MaxAttempts: 5}
	update := &controlv1.EndpointSettings{Url: "https://hooks.example.com/v2", Description: "ignored: not in the mask"}
	next, err := endpoint.ApplyMask(current, update, []string{"settings.url", "max_attempts"})
	fmt.Println(next.GetUrl(), next.GetEventTypes(), next.GetMaxAttempts(), next.GetDescription() == "", err)
	// Output: https://hooks.example.com/v2 [invoice.paid] 0 true <nil>
}

func ExampleNewKind() {
	log := openLogForExample()
	defer log.Close()
	// cluster.Configure(..., cluster.WithKinds(kind, tenant.NewKind(...)))
	kind := endpoint.NewKind(endpoint.Config{Log: log, Keyring: keyringForExample()})
	fmt.Println(kind.Kind)
	// Output: endpoint
}

func openLogForExample() events.Log {
	l, err := embedded.Open(embedded.Config{Dir: "/example", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		panic(err)
	}
	return l
}

func keyringForExample() *seal.Keyring {
	kr, err := seal.NewKeyring(seal.Key{Secret: make([]byte, seal.KeySize)})
	if err != nil {
		panic(err)
	}
	return kr
}

func ExampleListDigest() {
	// The ids a recovery replays, in replay order (planned time, then id):
	// anyone holding them can check a dry run's digest.
	fmt.Println(endpoint.ListDigest([]string{"dlv_a", "dlv_b"}))
	fmt.Println(endpoint.ListDigest(nil))
	// Output:
	// 0059a2c2950fd3d54a136db9949c09d724a72899e8623c01b476a27ef83df6bd
	// e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
}
