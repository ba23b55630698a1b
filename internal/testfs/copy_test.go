package testfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCopyDir(t *testing.T) {
	src := t.TempDir()
	// a file with a hole between two written blocks, a short one, an
	// empty one, a skipped one and a subdirectory
	sparse := append(append([]byte("head"), make([]byte, 3*4096)...), "tail"...)
	files := map[string][]byte{"sparse": sparse, "short": []byte("x"), "empty": nil, "LOCK": []byte("held")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	CopyDir(t, src, dst, "LOCK")
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if name == "LOCK" {
			if !os.IsNotExist(err) {
				t.Fatalf("LOCK was copied (err %v)", err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes (err %v), want %d", name, len(got), err, len(want))
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "sub")); !os.IsNotExist(err) {
		t.Fatalf("subdirectory copied (err %v)", err)
	}
}
