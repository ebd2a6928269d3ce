package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/attempt"
)

func ExampleParseMix() {
	mix, err := ParseMix("200:0.9,500:0.1")
	fmt.Println(mix, err)
	// Output: [{200 0.9} {500 0.1}] <nil>
}

// A receiver in the same process: the same delivery sent twice is one
// unique delivery and one duplicate, recognised by its webhook-id.
func ExampleReceiver() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYqr"
	r, err := NewReceiver("127.0.0.1:0", nil, Behaviour{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer cancel()
	r.SetSecret("ep_1", secret)

	key, _ := attempt.ParseSecret(secret)
	body := `{"invoice":"1001"}`
	for range 2 {
		now := time.Now()
		sig, _ := attempt.Sign("dlv_1", now, []byte(body), []attempt.Secret{{Version: 1, Key: key}}, nil)
		req, _ := http.NewRequest(http.MethodPost, r.URL("ep_1"), strings.NewReader(body))
		req.Header.Set("webhook-id", "dlv_1")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	st := r.Stats()
	fmt.Println("unique", st.Unique, "duplicates", st.Duplicates, "bad signatures", st.BadSignature)
	cancel()
	fmt.Println(<-done)
	// Output:
	// 200
	// 200
	// unique 1 duplicates 1 bad signatures 0
	// <nil>
}
