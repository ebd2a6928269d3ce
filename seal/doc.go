// Package seal keeps secrets sealed at rest. Signing secrets and ed25519
// seeds never reach the log in clear: the endpoint grain seals them with
// AES-256-GCM under a master key before it appends an event, and opens them
// only in memory, when it signs.
//
// # Where it sits
//
// cmd loads a [Keyring] at start with [LoadKeyring] (from HOOKLINE_MASTER_KEY,
// or, in development, from a key file created in the data directory) or
// [LoadKeyFile] (HOOKLINE_MASTER_KEY_FILE), checks it against the log with
// [CheckLog], and hands it to actors/endpoint through its Config and to the
// control API for the reseal.
//
// # Keys, ids and rotation
//
// Every sealed value records the id of the master key that sealed it, so the
// keyring can hold older keys beside the current one: new values are sealed
// under the current key, old ones still open under theirs. Dropping a key from
// the keyring crypto-shreds every value sealed under it.
//
// # Which keys the log needs
//
// A node on a shared log must hold every key its secrets are sealed under,
// or every attempt of their endpoints fails there. [RegistryStream]
// records the keys: at start, [CheckLog] refuses a node that lacks a
// registered key that is not retired (or holds another key under its id,
// or whose current key is retired), then registers the node's current key
// before anything is sealed under it.
//
// # Rotating the master key
//
// Without downtime, in three steps: every node gets the new key first and
// the old one after it, one restart at a time (secrets sealed under either
// open everywhere); `hookline keys reseal` has every endpoint grain seal its
// live secrets anew under the new key (the same secrets: receivers see no
// change) and then [RetireOthers] retires the old key; every node drops it.
// A grain on a node whose current key differs refuses the reseal, and then
// nothing is retired.
//
// # Binding
//
// The additional authenticated data (AAD) binds a sealed value to where it
// belongs, for example "endpoint/ep_1/secret/3" (see [SecretAAD]): a
// ciphertext copied to another endpoint or version does not open.
//
// Keys are never logged, and no error message contains one.
package seal
