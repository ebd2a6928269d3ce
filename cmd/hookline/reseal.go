package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// keysReseal runs `hookline keys reseal` (admin): it asks a node to seal
// every live endpoint secret under the node's current master key and to
// retire the others. It is self-contained (its own flags and connection)
// so that the client commands can wire it in as they see fit.
func keysReseal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hookline keys reseal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("HOOKLINE_ADDR", "127.0.0.1:7070"), "the node's gRPC address (HOOKLINE_ADDR)")
	token := fs.String("token", os.Getenv("HOOKLINE_TOKEN"), "the admin token (HOOKLINE_TOKEN)")
	ca := fs.String("ca", os.Getenv("HOOKLINE_CA"), "PEM file of the CA that signed the node's certificate; empty: plaintext, for loopback (HOOKLINE_CA)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long the reseal may take")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: hookline keys reseal [flags]

Rotates the master key without downtime. First give every node the new key
first and the old one after it (HOOKLINE_MASTER_KEY="new,old") and restart
them one by one; then run this: every live endpoint secret is sealed anew
under the new key, and the old key is retired. Then the nodes may drop the
old key (HOOKLINE_MASTER_KEY="new"), one by one.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("keys reseal: unexpected argument %q", fs.Arg(0))
	}
	creds := insecure.NewCredentials()
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			return fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca %s: no PEM certificate in it", *ca)
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("connect %s: %w", *addr, err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if *token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*token)
	}
	resp, err := controlv1.NewTenantServiceClient(cc).ResealSecrets(ctx, &controlv1.ResealSecretsRequest{})
	if err != nil {
		return fmt.Errorf("keys reseal: %w", err)
	}
	if *asJSON {
		b, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true}.Marshal(resp)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "current key:  %s\nendpoints:    %d\nretired keys: %v\n", resp.GetCurrentKeyId(), resp.GetEndpoints(), resp.GetRetiredKeyIds())
		for _, f := range resp.GetFailed() {
			fmt.Fprintf(stdout, "failed:       %s\n", f)
		}
	}
	if n := len(resp.GetFailed()); n > 0 {
		return fmt.Errorf("keys reseal: %d endpoints did not reseal, so no key was retired; fix the cause (every node must seal under %s) and run it again", n, resp.GetCurrentKeyId())
	}
	return nil
}
