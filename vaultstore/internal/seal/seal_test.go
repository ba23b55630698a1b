package seal

import (
	"bytes"
	"crypto/cipher"
	"errors"
	"math"
	"strconv"
	"testing"
)

func testAEAD(tb testing.TB, fill byte) cipher.AEAD {
	tb.Helper()
	aead, err := NewAEAD(bytes.Repeat([]byte{fill}, KeySize))
	if err != nil {
		tb.Fatal(err)
	}
	return aead
}

func TestNewAEADKeySize(t *testing.T) {
	for _, tc := range []struct {
		size int
		ok   bool
	}{{0, false}, {16, false}, {24, false}, {31, false}, {32, true}, {33, false}} {
		_, err := NewAEAD(make([]byte, tc.size))
		if (err == nil) != tc.ok {
			t.Errorf("NewAEAD(%d bytes) error = %v, want ok=%v", tc.size, err, tc.ok)
		}
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	aead := testAEAD(t, 1)
	for _, tc := range []struct {
		name      string
		version   uint32
		plaintext []byte
		aad       []byte
	}{
		{"empty plaintext", 1, nil, []byte("tenant|id")},
		{"short", 1, []byte("4242424242424242"), []byte("token|t|x")},
		{"no aad", 7, []byte(`{"a":1}`), nil},
		{"max version", math.MaxUint32, []byte("x"), []byte("a")},
		{"binary", 2, []byte{0, 0xff, 0, 0x80}, []byte{0}},
		{"large", 3, bytes.Repeat([]byte("abc"), 1<<15), []byte("big")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sealed, err := Seal(aead, tc.version, tc.plaintext, tc.aad)
			if err != nil {
				t.Fatal(err)
			}
			if want := sealHeader + aead.NonceSize() + len(tc.plaintext) + aead.Overhead(); len(sealed) != want {
				t.Errorf("sealed length %d, want %d", len(sealed), want)
			}
			if len(tc.plaintext) >= 8 && bytes.Contains(sealed, tc.plaintext) {
				t.Error("sealed value contains the plaintext")
			}
			v, err := Version(sealed)
			if err != nil || v != tc.version {
				t.Errorf("sealedVersion = %d, %v; want %d", v, err, tc.version)
			}
			got, err := Open(aead, sealed, tc.aad)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if !bytes.Equal(got, tc.plaintext) {
				t.Errorf("open = %q, want %q", got, tc.plaintext)
			}
			again, err := Seal(aead, tc.version, tc.plaintext, tc.aad)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(again, sealed) {
				t.Error("sealing twice gave identical output: nonce is not random")
			}
		})
	}
}

func TestOpenRejectsTampering(t *testing.T) {
	aead := testAEAD(t, 1)
	aad := []byte("token|tenant|id")
	sealed, err := Seal(aead, 1, []byte(`{"number":"4242424242424242"}`), aad)
	if err != nil {
		t.Fatal(err)
	}
	type tamper struct {
		name   string
		aead   cipher.AEAD
		sealed []byte
		aad    []byte
	}
	cases := []tamper{
		{"wrong aad", aead, sealed, []byte("token|tenant|other")},
		{"aad dropped", aead, sealed, nil},
		{"aad extended", aead, sealed, append(bytes.Clone(aad), 'x')},
		{"wrong key", testAEAD(t, 2), sealed, aad},
		{"nil", aead, nil, aad},
		{"empty", aead, []byte{}, aad},
		{"trailing byte", aead, append(bytes.Clone(sealed), 0), aad},
		{"format byte zero", aead, append([]byte{0}, sealed[1:]...), aad},
		{"format byte two", aead, append([]byte{2}, sealed[1:]...), aad},
	}
	for i := range sealed {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		cases = append(cases, tamper{"flip bit of byte " + strconv.Itoa(i), aead, b, aad})
	}
	for n := range len(sealed) {
		cases = append(cases, tamper{"truncated to " + strconv.Itoa(n), aead, bytes.Clone(sealed[:n]), aad})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := Open(tc.aead, tc.sealed, tc.aad)
			if !errors.Is(err, ErrIntegrity) {
				t.Fatalf("open error = %v, want ErrIntegrity", err)
			}
			if pt != nil {
				t.Errorf("open returned plaintext %q with an error", pt)
			}
		})
	}
	// The original still opens: the cases above did not alias it.
	if _, err := Open(aead, sealed, aad); err != nil {
		t.Fatalf("original no longer opens: %v", err)
	}
}

func TestSealedVersionRejectsJunk(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"nil", nil},
		{"short", []byte{sealFormat, 0, 0}},
		{"wrong format", []byte{9, 0, 0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Version(tc.in); !errors.Is(err, ErrIntegrity) {
				t.Errorf("sealedVersion error = %v, want ErrIntegrity", err)
			}
		})
	}
}

// DataKeys seal under the newest version and open any version held;
// a value sealed for one record does not open as another's.
func TestDataKeys(t *testing.T) {
	k := NewDataKeys()
	for v, fill := range map[uint32]byte{1: 1, 2: 2} {
		if err := k.Add(v, bytes.Repeat([]byte{fill}, KeySize)); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Add(3, make([]byte, 16)); err == nil {
		t.Error("Add took a 16-byte key")
	}
	if k.Current() != 2 || k.Len() != 2 {
		t.Fatalf("current %d of %d versions, want 2 of 2", k.Current(), k.Len())
	}
	aad := RecordAAD("application", "tenant-a", "app-1")
	sealed, err := k.Seal([]byte("x"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Version(sealed); v != 2 {
		t.Errorf("sealed under version %d, want current 2", v)
	}
	if got, err := k.Open(sealed, aad); err != nil || string(got) != "x" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	old, err := Seal(k.aeads[1], 1, []byte("y"), aad)
	if err != nil {
		t.Fatal(err)
	}
	resealed, changed, err := k.Reseal(old, aad)
	if err != nil || !changed {
		t.Fatalf("Reseal of version 1: changed %v, %v", changed, err)
	}
	if v, _ := Version(resealed); v != 2 {
		t.Errorf("resealed under version %d, want 2", v)
	}
	if got, err := k.Open(resealed, aad); err != nil || string(got) != "y" {
		t.Errorf("resealed value opens to %q, %v", got, err)
	}
	only1 := NewDataKeys()
	if err := only1.Add(1, bytes.Repeat([]byte{1}, KeySize)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := only1.Reseal(sealed, aad); !errors.Is(err, ErrIntegrity) {
		t.Errorf("Reseal without the value's version: %v, want ErrIntegrity", err)
	}
	if same, changed, err := k.Reseal(sealed, aad); err != nil || changed || !bytes.Equal(same, sealed) {
		t.Errorf("Reseal of a current value: changed %v, %v", changed, err)
	}
	for _, tc := range []struct {
		name   string
		k      *DataKeys
		sealed []byte
		aad    []byte
	}{
		{"other id", k, sealed, RecordAAD("application", "tenant-a", "app-2")},
		{"other kind", k, sealed, RecordAAD("apikey", "tenant-a", "app-1")},
		{"other tenant", k, sealed, RecordAAD("application", "tenant-b", "app-1")},
		{"id moved into the tenant", k, sealed, RecordAAD("application", "tenant-a|app-1", "")},
		{"unknown key version", only1, sealed, aad},
		{"garbage", k, []byte("garbage"), aad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.k.Open(tc.sealed, tc.aad); !errors.Is(err, ErrIntegrity) {
				t.Errorf("Open error = %v, want ErrIntegrity", err)
			}
		})
	}
}

func FuzzOpen(f *testing.F) {
	aead := testAEAD(f, 1)
	validAAD := []byte("token|tenant|id")
	// A genuine sealed value built with a fixed nonce, so that every fuzz
	// worker process knows the same one; it must open like any other.
	header := []byte{sealFormat, 0, 0, 0, 1}
	nonce := bytes.Repeat([]byte{7}, aead.NonceSize())
	valid := aead.Seal(append(bytes.Clone(header), nonce...), nonce, []byte("secret"), sealAAD(header, validAAD))
	if pt, err := Open(aead, valid, validAAD); err != nil || string(pt) != "secret" {
		f.Fatalf("fixed-nonce seal does not open: %q, %v", pt, err)
	}
	f.Add(valid, validAAD)
	f.Add([]byte{}, []byte{})
	f.Add([]byte{sealFormat}, validAAD)
	f.Add([]byte{sealFormat, 0, 0, 0, 1}, validAAD)
	f.Add(make([]byte, sealHeader+aead.NonceSize()+aead.Overhead()), validAAD)
	f.Add(append([]byte{sealFormat, 0xff, 0xff, 0xff, 0xff}, bytes.Repeat([]byte{0xaa}, 40)...), []byte(nil))
	f.Fuzz(func(t *testing.T, sealed, aad []byte) {
		_, _ = Version(sealed)
		pt, err := Open(aead, sealed, aad)
		if err == nil {
			// Only the genuine value opens.
			if !bytes.Equal(sealed, valid) || !bytes.Equal(aad, validAAD) || string(pt) != "secret" {
				t.Fatalf("forged value opened: %x aad %q -> %q", sealed, aad, pt)
			}
			return
		}
		if !errors.Is(err, ErrIntegrity) {
			t.Fatalf("open error = %v, want ErrIntegrity", err)
		}
		if pt != nil {
			t.Fatalf("plaintext returned with an error")
		}
	})
}

// BenchmarkSealOpen measures sealing and opening as every stored record
// pays for them: AES-256-GCM with its associated data (vaultstore's
// BenchmarkSealRecord adds a card token's record encoded and decoded).
func BenchmarkSealOpen(b *testing.B) {
	aead := testAEAD(b, 1)
	plain := bytes.Repeat([]byte("x"), 256)
	aad := RecordAAD("token", "tenant-a", "token-1")
	sealed, err := Seal(aead, 1, plain, aad)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Seal/256B", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := Seal(aead, 1, plain, aad)
			if err != nil {
				b.Fatal(err)
			}
			sink = out
		}
	})
	b.Run("Open/256B", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := Open(aead, sealed, aad)
			if err != nil {
				b.Fatal(err)
			}
			sink = out
		}
	})
}

var sink []byte
