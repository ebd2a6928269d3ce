package verify_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hookline/hookline/verify"
)

func Example() {
	// In a receiver: the secret comes from the endpoint's settings, the
	// headers and raw body from the request.
	v, err := verify.New("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		fmt.Println(err)
		return
	}
	v.Now = func() time.Time { return time.Unix(1614265330, 0) } // a fixed clock for the example

	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")

	fmt.Println(v.Verify(h, []byte(`{"test": 2432232314}`)))
	fmt.Println(v.Verify(h, []byte(`{"test": 0}`)))
	// Output:
	// <nil>
	// verify: no matching signature
}
