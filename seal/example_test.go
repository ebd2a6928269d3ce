package seal_test

import (
	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/hookline/hookline/seal"
)

func ExampleKeyring() {
	// In production the spec comes from HOOKLINE_MASTER_KEY.
	spec := "k2:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)) +
		",k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	kr, err := seal.ParseKeys(spec)
	if err != nil {
		panic(err)
	}
	keyID, nonce, ct, err := kr.Seal([]byte("whsec_example"), seal.SecretAAD("ep_1", 1))
	if err != nil {
		panic(err)
	}
	plain, err := kr.Open(keyID, nonce, ct, seal.SecretAAD("ep_1", 1))
	fmt.Println(keyID, string(plain), err)
	_, err = kr.Open(keyID, nonce, ct, seal.SecretAAD("ep_2", 1))
	fmt.Println(err)
	// Output:
	// k2 whsec_example <nil>
	// seal: cannot open sealed value under key "k2"
}
