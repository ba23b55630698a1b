package caddymodule

// Adversarial review: limits that concurrent requests must not get past.

import (
	"net/http"
	"sync"
	"testing"
)

// TestAttackWebhookLimitUnderRace: a tenant at 19 webhooks that sends
// many creates at once ends with 20, never more.
func TestAttackWebhookLimitUnderRace(t *testing.T) {
	e := newTokenEnv(t, false, true)
	for range 19 {
		tvWantStatus(t, e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil)), http.StatusCreated, "webhook")
	}
	const racers = 8
	var wg sync.WaitGroup
	statuses := make([]int, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil)).status
		}()
	}
	wg.Wait()
	if n := attackWebhookCount(t, e); n != 20 {
		t.Errorf("%d webhooks after racing creates (answers %v), want 20", n, statuses)
	}
}

// TestAttackSigningKeyUnderRace: a tenant's first webhooks, created at
// once, share one signing key.
func TestAttackSigningKeyUnderRace(t *testing.T) {
	e := newTokenEnv(t, false, true)
	const racers = 6
	var wg sync.WaitGroup
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.do(tvRoleMgmt, http.MethodPost, "/webhooks", attackWebhookBody(nil))
		}()
	}
	wg.Wait()
	first := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/signing-key", nil)
	tvWantStatus(t, first, http.StatusOK, "signing key")
	for range 3 {
		again := e.do(tvRoleMgmt, http.MethodGet, "/webhooks/signing-key", nil)
		if string(again.raw) != string(first.raw) {
			t.Fatalf("the signing key changed: %s then %s", first.raw, again.raw)
		}
	}
}
