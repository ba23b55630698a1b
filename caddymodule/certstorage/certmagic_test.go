package certstorage

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// testIssuer is a CA of the test's own that signs every CSR, counts its
// issuances, and can hold the first one until the test lets it go.
type testIssuer struct {
	key    *ecdsa.PrivateKey
	ca     *x509.Certificate
	issued atomic.Int32
	hold   chan struct{} // the first Issue waits for it to close
	inside chan struct{} // closed when the first Issue starts
	once   sync.Once
}

func newTestIssuer(t *testing.T) *testIssuer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "certstorage test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &testIssuer{key: key, ca: ca, hold: make(chan struct{}), inside: make(chan struct{})}
}

func (i *testIssuer) IssuerKey() string { return "certstorage-test-ca" }

func (i *testIssuer) Issue(ctx context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	n := i.issued.Add(1)
	if n == 1 {
		i.once.Do(func() { close(i.inside) })
		select {
		case <-i.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(int64(100 + n)), Subject: pkix.Name{CommonName: csr.DNSNames[0]},
		DNSNames: csr.DNSNames, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.ca, csr.PublicKey, i.key)
	if err != nil {
		return nil, err
	}
	return &certmagic.IssuedCertificate{Certificate: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// newCertmagicNode is one node's certmagic: its own cache, over s.
func newCertmagicNode(t *testing.T, s *Storage, iss certmagic.Issuer) *certmagic.Config {
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		Logger:           zap.NewNop(),
	})
	t.Cleanup(cache.Stop)
	cfg = certmagic.New(cache, certmagic.Config{
		Storage: s,
		Issuers: []certmagic.Issuer{iss},
		Logger:  zap.NewNop(),
		OCSP:    certmagic.OCSPConfig{DisableStapling: true},
	})
	return cfg
}

// TestCertmagicSharedCertificate is the whitelabel case through
// certmagic itself: two nodes asked for a certificate for the same host
// at the same time obtain it once, under the storage's lock, and both
// serve that one certificate.
func TestCertmagicSharedCertificate(t *testing.T) {
	dsn := newDatabase(t)
	ctx := testCtx(t)
	a := newNode(t, dsn, Options{})
	b := newNode(t, dsn, Options{LockPoll: 50 * time.Millisecond})
	iss := newTestIssuer(t)
	nodeA, nodeB := newCertmagicNode(t, a, iss), newCertmagicNode(t, b, iss)

	const host = "pay.whitelabel.example"
	errs := make(chan error, 2)
	go func() { errs <- nodeA.ObtainCertSync(ctx, host) }()
	// Node A is inside the CA call, under the lock; node B then asks too
	// and must wait on the lock, not call the CA.
	select {
	case <-iss.inside:
	case <-ctx.Done():
		t.Fatal("node A never reached the CA")
	}
	waiting := make(chan struct{})
	var once sync.Once
	b.onTry = func(name string, _ bool) { once.Do(func() { close(waiting) }) }
	go func() { errs <- nodeB.ObtainCertSync(ctx, host) }()
	select {
	case <-waiting:
	case err := <-errs:
		t.Fatalf("node B finished (%v) without waiting for node A's lock", err)
	}
	close(iss.hold)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := iss.issued.Load(); n != 1 {
		t.Errorf("the CA issued %d certificates, want 1", n)
	}

	certA, err := nodeA.CacheManagedCertificate(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	certB, err := nodeB.CacheManagedCertificate(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if certA.Leaf == nil || certB.Leaf == nil || certA.Leaf.SerialNumber.Cmp(certB.Leaf.SerialNumber) != 0 {
		t.Errorf("the nodes serve different certificates: %v and %v", certA.Leaf, certB.Leaf)
	}
	// A third node, started later, finds it in storage without the CA.
	c := newNode(t, dsn, Options{})
	certC, err := newCertmagicNode(t, c, iss).CacheManagedCertificate(ctx, host)
	if err != nil || certC.Leaf.SerialNumber.Cmp(certA.Leaf.SerialNumber) != 0 {
		t.Errorf("a new node loads %v, %v", certC.Leaf, err)
	}
	// No lock is left behind.
	var locks int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM `+a.locks).Scan(&locks); err != nil || locks != 0 {
		t.Errorf("%d locks left (%v)", locks, err)
	}
}
