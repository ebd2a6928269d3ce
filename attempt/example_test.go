package attempt_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/hookline/hookline/attempt"
)

// staticResolver answers every lookup with one address.
type staticResolver string

func (r staticResolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP(string(r))}}, nil
}

func ExamplePolicy_CheckURL() {
	p := &attempt.Policy{Resolver: staticResolver("93.184.216.34")}

	u, err := p.CheckURL(context.Background(), "HTTPS://Bücher.Example.com/hooks?v=1")
	fmt.Println(u, err)

	_, err = p.CheckURL(context.Background(), "https://hooks.example.com:8443/")
	fmt.Println(err)

	_, err = p.CheckURL(context.Background(), "https://0x7f.1/")
	var pe *attempt.PolicyError
	fmt.Println(errors.Is(err, attempt.ErrBlocked), errors.As(err, &pe) && pe.Rule == attempt.RuleAddress)
	// Output:
	// https://xn--bcher-kva.example.com/hooks?v=1 <nil>
	// url: port 8443 is not allowed (allowed: 443); use https on an allowed port
	// true true
}

func ExampleSign() {
	key, _ := attempt.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	sig, _ := attempt.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0),
		[]byte(`{"test": 2432232314}`), []attempt.Secret{{Version: 1, Key: key}}, nil)
	fmt.Println(sig)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

func ExampleSchedule_Next() {
	var s attempt.Schedule // base 5 s, cap 1 h, deadline 24 h, 15 attempts
	planned := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	half := func() float64 { return 0.5 }

	next, ok := s.Next(3, planned, planned, 0, half)
	fmt.Println(next.Sub(planned), ok)
	next, ok = s.Next(3, planned, planned, 2*time.Minute, half) // a 429 with Retry-After: 120
	fmt.Println(next.Sub(planned), ok)
	_, ok = s.Next(15, planned, planned, 0, half)
	fmt.Println(ok)
	// Output:
	// 10s true
	// 2m0s true
	// false
}

func ExampleClient_Do() {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	c := attempt.NewClient(attempt.ClientConfig{
		Policy:    &attempt.Policy{AllowPrivate: true}, // development mode: the receiver is on loopback
		TLSConfig: &tls.Config{RootCAs: roots},
	})
	defer c.CloseIdleConnections()

	o := c.Do(context.Background(), attempt.Request{
		URL:        srv.URL + "/hooks",
		DeliveryID: "dlv_1",
		EventType:  "invoice.paid",
		Payload:    []byte(`{}`),
		Secrets:    []attempt.Secret{{Version: 1, Key: make([]byte, 32)}},
	})
	switch class := o.Class.(type) {
	case attempt.Success:
		fmt.Println("delivered")
	case attempt.Retryable:
		fmt.Println("retry later")
	case attempt.Permanent:
		fmt.Println(o.Status, "permanent, pause endpoint:", class.Gone)
	}
	// Output: 410 permanent, pause endpoint: true
}
