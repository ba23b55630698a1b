package caddymodule

// Adversarial review of what webhook deliveries carry: real deliveries,
// through the vault's own transport, to a receiver on 127.0.0.1.

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/internal/testjson"
	"github.com/tokenvault/tokenvault/vaultstore"
)

// attackDelivery is one request the receiver got.
type attackDelivery struct {
	path   string
	header http.Header
	body   []byte
}

// TestAttackWebhookPayloads: changes made with secrets in every place a
// caller can put one (ids, metadata, intents, encrypted data, documents,
// client keys) reach the receiver as events that name records by id only,
// with ids holding digit runs withheld, every body signed by the tenant's
// key; the other tenant's changes never reach this tenant's webhook, and
// surfaces without event types send nothing.
func TestAttackWebhookPayloads(t *testing.T) {
	e := newTokenEnv(t, false, true)
	tiKeys(t, e)
	setEgress(t, e, loopbackPolicy())
	var (
		mu   sync.Mutex
		got  []attackDelivery
		seen = make(chan struct{}, 1000)
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, attackDelivery{path: r.URL.Path, header: r.Header.Clone(), body: b})
		mu.Unlock()
		seen <- struct{}{}
	}))
	defer recv.Close()
	stop := e.store.StartWebhookDelivery(vaultstore.WebhookDeliveryConfig{Deliver: e.h.app.deliverWebhook, Poll: 50 * time.Millisecond})
	defer stop()

	all := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/event-types", nil)
	var events []string
	for _, v := range all.body.([]any) {
		events = append(events, v.(string))
	}
	r := e.do(tvRoleMgmt, http.MethodPost, "/webhooks", map[string]any{"name": "all", "url": recv.URL + "/hook", "events": events})
	tvWantStatus(t, r, http.StatusCreated, "a webhook on every event")
	e.do("other-management", http.MethodPost, "/webhooks", map[string]any{"name": "other", "url": recv.URL + "/other", "events": events})

	// changes with secrets; the events they should send (the answers show
	// the callers' own ids and metadata, so they are not scanned)
	e.record = false
	want := 0
	e.create(tvRoleReveal, map[string]any{"id": "pan-" + tvCard, "type": "token", "data": tvSecretText, "metadata": map[string]any{"m": tvCard}})
	want++
	e.create(tvRoleReveal, tvCardBody())
	want++
	ti := e.do("web", http.MethodPost, "/token-intents", tvCardBody())
	e.create("backend", map[string]any{"token_intent_id": testjson.Str(ti.body, "id"), "id": "acct " + tvAccount})
	want++
	k := createJWEKey(t, e, tvRoleMgmt)
	e.create(tvRoleReveal, map[string]any{"type": "card", "encrypted": elementsJWE(t, k, `{"number":"`+tvCard+`"}`)})
	want++
	r = e.do(tvRoleReveal, http.MethodPost, "/tokenize", map[string]any{"a": tvSecretText, "b": map[string]any{"type": "card", "data": map[string]any{"number": tvCard}}})
	tvWantStatus(t, r, http.StatusOK, "tokenize")
	want += 2
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodPatch, "/tokens/pan-"+tvCard, map[string]any{"data": tvCardBadLuhn}), http.StatusOK, "update")
	want++
	tvWantStatus(t, e.do(tvRoleReveal, http.MethodDelete, "/tokens/pan-"+tvCard, nil), http.StatusNoContent, "delete")
	want++
	files := docApp(t, e, "files", "documents:create")
	want += 2 // application.created, key.created
	e.record = true
	ct, body := attackMultipart(t, attackPart{name: "document", content: []byte(tvSecretText)})
	e.do(files, http.MethodPost, "/documents", body, "Content-Type", ct)
	e.do(tvRoleMgmt, http.MethodDelete, "/keys/"+k.id, nil)
	// the other tenant's change
	e.do(tvRoleOther, http.MethodPost, "/tokens", map[string]any{"type": "token", "data": "other"})
	want++ // to /other

	deadline := time.After(60 * time.Second)
	for n := 0; n < want; n++ {
		select {
		case <-seen:
		case <-deadline:
			t.Fatalf("%d of %d events delivered in 60 s", n, want)
		}
	}
	// a moment for stray events (there should be none) to arrive
	time.Sleep(500 * time.Millisecond)

	sk := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/signing-key", nil)
	block, _ := pem.Decode([]byte(testjson.Str(sk.body, "public_key")))
	if block == nil {
		t.Fatalf("signing key: %s", sk.raw)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	types := map[string]int{}
	for _, d := range got {
		mine := strings.Contains(string(d.body), `"tenant_id":"`+e.tenantID+`"`)
		if mine != (d.path == "/hook") {
			t.Errorf("a delivery to %s of the wrong tenant: %s", d.path, d.body)
			continue
		}
		if !mine {
			continue // the other tenant's, verified with its own key
		}
		for _, s := range append([]string{tvCard[4:], tvAccount, tvCardBadLuhn, "Ωmega"}, tvSecrets...) {
			if strings.Contains(string(d.body), s) {
				t.Errorf("a delivery holds %q: %s", s, d.body)
			}
		}
		sig, err := base64.StdEncoding.DecodeString(d.header.Get("Svc-Signature"))
		sum := sha256.Sum256(d.body)
		if err != nil || rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, sum[:], sig, nil) != nil {
			t.Errorf("a delivery's signature does not verify: %s", d.body)
		}
		types[d.header.Get("Svc-Event-Type")]++
	}
	if len(got) != want || types["token.created"] != 6 || types["token.updated"] != 1 || types["token.deleted"] != 1 || types["application.created"] != 1 || types["key.created"] != 1 || len(types) != 5 {
		t.Errorf("%d deliveries (this tenant's: %v), want %d: 6 token.created, 1 token.updated, 1 token.deleted, 1 application.created, 1 key.created, and the other tenant's one", len(got), types, want)
	}
	for _, d := range got {
		if d.path == "/hook" {
			if !strings.Contains(string(d.body), redactWithheld) {
				t.Errorf("the first token's id, holding a card number, is not withheld: %s", d.body)
			}
			break
		}
	}
}

// redactWithheld is how a payload shows an id that holds a digit run.
const redactWithheld = "(id not shown)"
