// Package seal keeps secrets sealed at rest. Signing secrets and ed25519
// seeds never reach the log in clear: the endpoint grain seals them with
// AES-256-GCM under a master key before it appends an event, and opens them
// only in memory, when it signs.
//
// # Where it sits
//
// cmd loads a [Keyring] at start with [LoadKeyring] (from HOOKLINE_MASTER_KEY,
// or, in development, from a key file created in the data directory) and hands
// it to actors/endpoint through its Config. Nothing else imports this package.
//
// # Keys, ids and rotation
//
// Every sealed value records the id of the master key that sealed it, so the
// keyring can hold older keys beside the current one: new values are sealed
// under the current key, old ones still open under theirs. Dropping a key from
// the keyring crypto-shreds every value sealed under it.
//
// # Binding
//
// The additional authenticated data (AAD) binds a sealed value to where it
// belongs, for example "endpoint/ep_1/secret/3" (see [SecretAAD]): a
// ciphertext copied to another endpoint or version does not open.
//
// Keys are never logged, and no error message contains one.
package seal
