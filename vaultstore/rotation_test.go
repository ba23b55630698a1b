package vaultstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rotationWorld is a store with a tenant, a revealing application and tokens.
type rotationWorld struct {
	s      *Store
	dir    string
	tenant *CreatedTenant
	req    TokenRequest
	ids    []string
}

func newRotationWorld(t *testing.T, dir string, key []byte, tokens int) *rotationWorld {
	t.Helper()
	s := openTestStore(t, Options{Dir: dir, MasterKey: key})
	w := &rotationWorld{s: s, dir: dir}
	w.tenant = mustCreateTenant(t, s, "rot", TenantTest)
	app, _ := mustCreateApp(t, s, w.tenant.Tenant.ID, ApplicationInput{Name: "r", Type: AppPrivate,
		Rules: []AccessRule{{Priority: 1, Container: "/", Transform: TransformReveal, Permissions: []string{"token:create", "token:read"}}}})
	w.req = TokenRequest{Tenant: w.tenant.Tenant, Application: app}
	for i := 0; i < tokens; i++ {
		w.ids = append(w.ids, w.create(t, i))
	}
	return w
}

func (w *rotationWorld) create(t *testing.T, i int) string {
	t.Helper()
	tok, err := w.s.CreateToken(context.Background(), w.req, TokenInput{Type: "card", Data: map[string]any{
		"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030, "cvc": "123"},
		Metadata: map[string]string{"i": fmt.Sprint(i)}})
	if err != nil {
		t.Fatal(err)
	}
	return tok.ID
}

// readAll reads every token back in full, the CVC included.
func (w *rotationWorld) readAll(t *testing.T, s *Store) {
	t.Helper()
	for i, id := range w.ids {
		tok, err := s.GetToken(context.Background(), w.req, id)
		if err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
		data := tok.Data.(map[string]any)
		if data["number"] != "4242424242424242" || data["cvc"] != "123" || tok.Metadata["i"] != fmt.Sprint(i) {
			t.Fatalf("token %d reads %v %v", i, data, tok.Metadata)
		}
	}
}

var rotatedMasterKey = bytes.Repeat([]byte{7}, MasterKeySize)

func TestRotateMasterKey(t *testing.T) {
	dir := t.TempDir()
	w := newRotationWorld(t, dir, testMasterKey, 5)
	if err := w.s.RotateMasterKey(context.Background(), rotatedMasterKey); err != nil {
		t.Fatal(err)
	}
	w.readAll(t, w.s)
	if !w.s.MasterKeyMatches(rotatedMasterKey) || w.s.MasterKeyMatches(testMasterKey) {
		t.Error("the running store does not report the new key")
	}
	// new tenants and CVCs after the rotation
	w.ids = append(w.ids, w.create(t, len(w.ids)))
	closeTestStore(t, w.s)

	if _, err := Open(withTestEngine(t, Options{Dir: dir, MasterKey: testMasterKey})); !errors.Is(err, ErrWrongMasterKey) {
		t.Fatalf("the old key still opens the store: %v", err)
	}
	s := openTestStore(t, Options{Dir: dir, MasterKey: rotatedMasterKey})
	w.readAll(t, s)
	if meta, err := readTestMeta(t, dir); err != nil || meta.RotatingTo != nil || !bytes.Equal(meta.KeyCheck, keyCheck(rotatedMasterKey)) {
		t.Errorf("meta after rotation: %+v, %v", meta, err)
	}
}

// failAfterUpdates fails every write transaction after the first n.
type failAfterUpdates struct {
	KV
	left atomic.Int64
}

func (f *failAfterUpdates) Update(ctx context.Context, fn func(Writer) error) error {
	if f.left.Add(-1) < 0 {
		return errors.New("injected: storage stopped")
	}
	return f.KV.Update(ctx, fn)
}

// TestRotateMasterKeyInterrupted: a rotation that stops half way needs
// both keys to open, and finishes when it has them.
func TestRotateMasterKeyInterrupted(t *testing.T) {
	dir := t.TempDir()
	// enough tenants for several rewrap batches
	func() {
		s := openTestStore(t, Options{Dir: dir})
		for i := 0; i < rewrapBatch+10; i++ {
			mustCreateTenant(t, s, fmt.Sprint("t", i), TenantTest)
		}
		closeTestStore(t, s)
	}()
	faults := &failAfterUpdates{}
	faults.left.Store(1 << 40)
	s := openTestStore(t, Options{Dir: dir, WrapKV: func(kv KV) KV { faults.KV = kv; return faults }})
	ct := mustCreateTenant(t, s, "cvc", TenantTest)
	app, _ := mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{Name: "r", Type: AppPrivate,
		Rules: []AccessRule{{Priority: 1, Container: "/", Transform: TransformReveal, Permissions: []string{"token:create", "token:read"}}}})
	req := TokenRequest{Tenant: ct.Tenant, Application: app}
	tok, err := s.CreateToken(context.Background(), req, TokenInput{Type: "card", Data: map[string]any{
		"number": "4242424242424242", "expiration_month": 12, "expiration_year": 2030, "cvc": "123"}})
	if err != nil {
		t.Fatal(err)
	}
	faults.left.Store(1) // one rewrap batch commits, then the storage fails
	if err := s.RotateMasterKey(context.Background(), rotatedMasterKey); err == nil {
		t.Fatal("the rotation did not stop")
	}
	faults.left.Store(1 << 40)
	closeTestStore(t, s)

	for _, o := range []Options{
		{Dir: dir, MasterKey: testMasterKey},
		{Dir: dir, MasterKey: rotatedMasterKey},
	} {
		if _, err := Open(withTestEngine(t, o)); !errors.Is(err, ErrWrongMasterKey) || !strings.Contains(err.Error(), "previous_master_keys") {
			t.Errorf("opening the half-rotated store with one key: %v", err)
		}
	}
	s = openTestStore(t, Options{Dir: dir, MasterKey: rotatedMasterKey, PreviousMasterKeys: [][]byte{testMasterKey}})
	got, err := s.GetToken(context.Background(), req, tok.ID)
	if err != nil || got.Data.(map[string]any)["cvc"] != "123" {
		t.Fatalf("after finishing: %v, %v", got, err)
	}
	closeTestStore(t, s)
	s = openTestStore(t, Options{Dir: dir, MasterKey: rotatedMasterKey})
	if tenants, err := s.ListTenants(context.Background()); err != nil || len(tenants) != rewrapBatch+11 {
		t.Fatalf("tenants after the rotation: %d, %v", len(tenants), err)
	}
}

// TestRotateDataKey: new writes use the new version, old records are
// re-sealed in the background, the old version is destroyed, and every
// record stays readable throughout.
func TestRotateDataKey(t *testing.T) {
	w := newRotationWorld(t, t.TempDir(), testMasterKey, resealBatch+50)
	ctx := context.Background()
	tid := w.tenant.Tenant.ID
	st, err := w.s.RotateDataKey(ctx, tid)
	if err != nil {
		t.Fatal(err)
	}
	if st.Current != 2 {
		t.Errorf("current version %d, want 2", st.Current)
	}
	// writes and reads while the re-seal runs
	for i := 0; i < 20; i++ {
		w.ids = append(w.ids, w.create(t, len(w.ids)))
	}
	w.readAll(t, w.s)
	st = waitReseal(t, w.s, tid)
	if st.Reseal == nil || st.Reseal.Error != "" || st.Reseal.Resealed < int64(resealBatch+50) {
		t.Errorf("re-seal: %+v", st.Reseal)
	}
	if len(st.Versions) != 1 || st.Versions[0] != 2 {
		t.Errorf("versions after the re-seal: %v, want [2]", st.Versions)
	}
	w.readAll(t, w.s)
	assertAllSealedUnder(t, w.s, tid, 2)
	logs, _, err := w.s.ListAudit(ctx, tid, AuditFilter{}, "", 100)
	if err != nil || len(logs) == 0 {
		t.Errorf("audit records after the re-seal: %d, %v", len(logs), err)
	}
	if _, err := w.s.RotateDataKey(ctx, "not-a-tenant"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown tenant: %v", err)
	}
}

// TestRotateDataKeyResumes: a re-seal stopped by Close resumes on Open.
func TestRotateDataKeyResumes(t *testing.T) {
	dir := t.TempDir()
	w := newRotationWorld(t, dir, testMasterKey, 30)
	tid := w.tenant.Tenant.ID
	// the new version is stored, then the process stops before re-sealing
	if err := w.s.addDataKeyVersion(context.Background(), tid); err != nil {
		t.Fatal(err)
	}
	closeTestStore(t, w.s)
	s := openTestStore(t, Options{Dir: dir})
	st := waitReseal(t, s, tid)
	if len(st.Versions) != 1 || st.Versions[0] != 2 {
		t.Fatalf("versions after resuming: %v", st.Versions)
	}
	w.readAll(t, s)
	assertAllSealedUnder(t, s, tid, 2)
}

func waitReseal(t *testing.T, s *Store, tid string) *DataKeyStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := s.DataKeyStatus(context.Background(), tid)
		if err != nil {
			t.Fatal(err)
		}
		if (st.Reseal == nil || !st.Reseal.Running) && len(st.Versions) == 1 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the re-seal did not finish: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func assertAllSealedUnder(t *testing.T, s *Store, tid string, version uint32) {
	t.Helper()
	err := s.kv.View(context.Background(), func(r Reader) error {
		for _, p := range sealedPrefixes(tid) {
			if err := r.Scan(p.prefix, nil, func(key, sealed []byte) error {
				if v, _ := sealedVersion(sealed); v != version {
					t.Errorf("%s sealed under version %d", key, v)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
