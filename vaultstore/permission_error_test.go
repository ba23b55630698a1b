package vaultstore

import (
	"errors"
	"strings"
	"testing"
)

// TestPermissionErrorNamesWhatIsMissing: every refusal of a token
// operation is a *PermissionError that matches ErrForbidden and names the
// permission, the container when access rules decided, and nothing of the
// token's data.
func TestPermissionErrorNamesWhatIsMissing(t *testing.T) {
	w := newTokenWorld(t, nil)
	card := w.mustCreate("admin", TokenInput{ID: "pe-card", Type: "card", Data: cardData(testVisa, testCVC)})
	text := w.mustCreate("admin", TokenInput{ID: "pe-text", Type: "token", Data: asSecret("pe-secret-text")})
	detok := func(app, perm, id string) error {
		_, _, err := w.s.Detokenize(w.ctx, w.req(app), DetokenizeOptions{Permission: perm, Limit: 10}, map[string]any{"n": "{{ " + id + " }}"})
		return err
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want PermissionError
		msg  string
	}{
		{"read outside every rule", func() error { _, err := w.get("pci", text.ID); return err },
			PermissionError{Permission: "token:read", Container: "/general/high/"},
			"no access rule of the application gives token:read on container /general/high/"},
		{"create outside every rule", func() error {
			_, err := w.create("pcihigh", TokenInput{Type: "token", Data: "x"})
			return err
		}, PermissionError{Permission: "token:create", Container: "/general/high/"},
			"no access rule of the application gives token:create on container /general/high/"},
		{"update where only create and read are given", func() error {
			_, err := w.update("generalupdater", card.ID, map[string]any{"metadata": map[string]any{"k": "v"}})
			return err
		}, PermissionError{Permission: "token:update", Container: "/pci/high/"},
			"no access rule of the application gives token:update on container /pci/high/"},
		{"delete outside every rule", func() error { return w.del("pci", text.ID) },
			PermissionError{Permission: "token:delete", Container: "/general/high/"},
			"no access rule of the application gives token:delete on container /general/high/"},
		{"mask change without reveal", func() error {
			_, err := w.update("masker", text.ID, map[string]any{"mask": "{{ data | reveal_last: 2 }}"})
			return err
		}, PermissionError{Permission: "token:read", Transform: TransformReveal, Container: "/general/high/", Action: "changing a token's mask"},
			"changing a token's mask needs token:read with transform reveal on container /general/high/, which no access rule of the application gives"},
		{"search without token:search anywhere", func() error {
			_, _, err := w.s.SearchTokens(w.ctx, w.req("writer"), "type:card", 0, 10)
			return err
		}, PermissionError{Permission: "token:search"},
			"the application lacks the permission token:search"},
		{"use under rules that do not give it", func() error { return detok("pci", "token:use", card.ID) },
			PermissionError{Permission: "token:use", Container: "/pci/high/"},
			"no access rule of the application gives token:use on container /pci/high/"},
		{"use with plain permissions that lack it", func() error { return detok("plain", "token:use", card.ID) },
			PermissionError{Permission: "token:use"},
			"the application lacks the permission token:use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			var pe *PermissionError
			if !errors.As(err, &pe) || !errors.Is(err, ErrForbidden) {
				t.Fatalf("err = %v, want a *PermissionError matching ErrForbidden", err)
			}
			if *pe != tc.want {
				t.Errorf("PermissionError = %+v, want %+v", *pe, tc.want)
			}
			if pe.Error() != tc.msg {
				t.Errorf("message %q, want %q", pe.Error(), tc.msg)
			}
			for _, secret := range []string{testVisa, testCVC, "pe-secret-text"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows token data: %v", err)
				}
			}
		})
	}
}

// TestPermissionErrorMessages: the message of each shape of refusal.
func TestPermissionErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		e    PermissionError
		want string
	}{
		{PermissionError{Permission: "log:read"}, "the application lacks the permission log:read"},
		{PermissionError{Permission: "token:read", Container: "/pci/high/"}, "no access rule of the application gives token:read on container /pci/high/"},
		{PermissionError{Permission: "token:use", Action: "invoking a proxy with an API key"},
			"invoking a proxy with an API key needs the permission token:use, which the application lacks"},
		{PermissionError{Permission: "token:read", Transform: TransformReveal, Container: "/bank/", Action: "changing a token's mask"},
			"changing a token's mask needs token:read with transform reveal on container /bank/, which no access rule of the application gives"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
