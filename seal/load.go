package seal

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// EnvVar is the environment variable that holds the master keys in
// production, in the format of [ParseKeys].
const EnvVar = "HOOKLINE_MASTER_KEY"

// KeyFileName is the name of the development key file in the data
// directory.
const KeyFileName = "master.key"

// ErrKeyFileMode means the key file can be read or written by others than
// its owner; it is refused until fixed with chmod 600.
var ErrKeyFileMode = errors.New("seal: key file permissions too open")

// ErrNoKey means neither a master key nor a data directory was given.
var ErrNoKey = errors.New("seal: no master key")

// LoadKeyring returns the master keyring. env is the value of
// HOOKLINE_MASTER_KEY ([EnvVar]; the caller reads the environment): when it is
// set, it is parsed with [ParseKeys] and the data directory is not touched.
// Otherwise the key is read from dataDir/master.key, which is created with a
// new random key and mode 0600 when missing (created is then true, so that
// the server can say so at start: development only, back it up or set
// HOOKLINE_MASTER_KEY). A key file readable or writable by group or others is
// refused with an error wrapping [ErrKeyFileMode].
//
// logger (nil: slog.Default()) receives one line when a file is created or
// read, with the key id and path, never the key.
func LoadKeyring(env, dataDir string, logger *slog.Logger) (kr *Keyring, created bool, err error) {
	if logger == nil {
		logger = slog.Default()
	}
	if strings.TrimSpace(env) != "" {
		kr, err := ParseKeys(env)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", EnvVar, err)
		}
		return kr, false, nil
	}
	if dataDir == "" {
		return nil, false, fmt.Errorf("%w: set %s (base64 of 32 random bytes) or give a data directory", ErrNoKey, EnvVar)
	}
	path := filepath.Join(dataDir, KeyFileName)
	kr, err = readKeyFile(path)
	if err == nil {
		logger.Info("master key file loaded", "path", path, "key_id", kr.CurrentID())
		return kr, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	kr, err = createKeyFile(dataDir, path, rand.Reader)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it first: use theirs.
		kr, err = readKeyFile(path)
		if err != nil {
			return nil, false, err
		}
		return kr, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	logger.Warn("master key file created; for production set "+EnvVar+" and keep the key safe", "path", path, "key_id", kr.CurrentID())
	return kr, true, nil
}

// LoadKeyFile reads the master keys from a file (HOOKLINE_MASTER_KEY_FILE,
// for a key mounted as a file): keys in the format of [ParseKeys], one per
// line or comma-separated, the current one first. Like the development key
// file, it is refused, wrapping [ErrKeyFileMode], when group or others may
// read or write it.
func LoadKeyFile(path string) (*Keyring, error) { return readKeyFile(path) }

func readKeyFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat key file: %w", err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; fix with: chmod 600 %s", ErrKeyFileMode, path, info.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	spec := strings.Join(strings.Fields(string(data)), ",")
	kr, err := ParseKeys(spec)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return kr, nil
}

func createKeyFile(dataDir, path string, r io.Reader) (*Keyring, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	secret := make([]byte, KeySize)
	if _, err := io.ReadFull(r, secret); err != nil {
		return nil, fmt.Errorf("generate master key: %w", err)
	}
	kr, err := NewKeyring(Key{Secret: secret})
	if err != nil {
		return nil, err
	}
	// O_EXCL: two processes starting at once must not both create a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	line := kr.CurrentID() + ":" + base64.StdEncoding.EncodeToString(secret) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return nil, fmt.Errorf("write key file %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync key file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close key file %s: %w", path, err)
	}
	return kr, nil
}
