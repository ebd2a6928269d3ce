package seal_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hookline/hookline/seal"
)

func TestLoadKeyringFromEnv(t *testing.T) {
	dir := t.TempDir()
	k := newKey(t)
	kr, created, err := seal.LoadKeyring("main:"+base64.StdEncoding.EncodeToString(k), dir, nil)
	if err != nil || created || kr.CurrentID() != "main" {
		t.Fatalf("LoadKeyring = %v, %v, %v", kr, created, err)
	}
	if _, err := os.Stat(filepath.Join(dir, seal.KeyFileName)); !os.IsNotExist(err) {
		t.Fatalf("key file written although the env var was set: %v", err)
	}
	if _, _, err := seal.LoadKeyring("nope", dir, nil); !errors.Is(err, seal.ErrKey) || !strings.Contains(err.Error(), seal.EnvVar) {
		t.Fatalf("bad env: %v", err)
	}
}

func TestLoadKeyringFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	kr, created, err := seal.LoadKeyring("", dir, logger)
	if err != nil || !created {
		t.Fatalf("first load = %v, %v", created, err)
	}
	path := filepath.Join(dir, seal.KeyFileName)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", info.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, b64, _ := strings.Cut(strings.TrimSpace(string(data)), ":")
	if strings.Contains(logs.String(), b64) {
		t.Fatal("the key was logged")
	}
	if !strings.Contains(logs.String(), kr.CurrentID()) {
		t.Fatalf("log lacks the key id: %s", logs.String())
	}

	again, created, err := seal.LoadKeyring("", dir, logger)
	if err != nil || created || again.CurrentID() != kr.CurrentID() {
		t.Fatalf("second load = %v, %v, %v", again, created, err)
	}
	id, nonce, ct, err := kr.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Open(id, nonce, ct, nil); err != nil || string(got) != "x" {
		t.Fatalf("reloaded key does not open: %v", err)
	}

	if runtime.GOOS == "windows" {
		return
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = seal.LoadKeyring("", dir, logger)
	if !errors.Is(err, seal.ErrKeyFileMode) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("loose mode: %v, want ErrKeyFileMode naming chmod 600", err)
	}
}

func TestLoadKeyringNothing(t *testing.T) {
	if _, _, err := seal.LoadKeyring("", "", nil); !errors.Is(err, seal.ErrNoKey) {
		t.Fatalf("err = %v, want ErrNoKey", err)
	}
}
