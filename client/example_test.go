package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// A producer publishes an event; publishing it again is a no-op, and the
// same id with other bytes is a conflict it can test for.
func Example() {
	dir, err := os.MkdirTemp("", "hookline-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	node, err := clienttest.Run(clienttest.Options{Dir: dir}) // a node in this process
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()
	key := issueKey(ctx, node.Addr)

	c, err := client.New(client.Config{Addr: node.Addr, Token: key})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ev := client.Event{ID: "inv_1001", Type: "invoice.paid", Payload: []byte(`{"invoice":"1001","amount":4200}`)}
	res, err := c.Publish(ctx, ev)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.GetEventId(), "duplicate:", res.GetDuplicate())

	res, err = c.Publish(ctx, ev) // a retry, a second relay: nothing new
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.GetEventId(), "duplicate:", res.GetDuplicate())

	ev.Payload = []byte(`{"invoice":"1001","amount":1}`)
	_, err = c.Publish(ctx, ev)
	fmt.Println("conflict:", errors.Is(err, client.ErrConflict))
	// Output:
	// inv_1001 duplicate: false
	// inv_1001 duplicate: true
	// conflict: true
}

// issueKey creates the tenant acme with the admin token and returns a new
// API key of it.
func issueKey(ctx context.Context, addr string) string {
	admin, err := client.New(client.Config{Addr: addr, Token: clienttest.AdminToken})
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}); err != nil {
		log.Fatal(err)
	}
	key, err := admin.IssueAPIKey(ctx, &controlv1.IssueApiKeyRequest{TenantId: "acme", Name: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	return key.GetApiKey()
}
