package vaultstore

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"
)

func TestAuthorizePlainPermissions(t *testing.T) {
	app := &Application{Type: AppPrivate, Permissions: []string{"token:create", "token:read", "token:use"}}
	for _, tc := range []struct {
		perm, container string
		want            string // "" means ErrForbidden
	}{
		{"token:use", "/pci/high/", TransformReveal},
		{"token:use", "/", TransformReveal},
		{"token:read", "/pci/high/", TransformMask},
		{"token:create", "/general/high/", TransformMask},
		{"token:delete", "/pci/high/", ""},
		{"token:search", "/general/high/", ""},
		{"proxy:read", "/", ""},
		{"", "/", ""},
	} {
		t.Run(tc.perm+" "+tc.container, func(t *testing.T) {
			got, err := app.Authorize(tc.perm, tc.container)
			if tc.want == "" {
				if !errors.Is(err, ErrForbidden) || got != "" {
					t.Errorf("Authorize = %q, %v; want ErrForbidden", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Authorize = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := (&Application{}).Authorize("token:read", "/"); !errors.Is(err, ErrForbidden) {
		t.Errorf("application without grants: %v, want ErrForbidden", err)
	}
}

func TestAuthorizeRules(t *testing.T) {
	// Sorted by priority, as validation leaves them.
	app := &Application{Type: AppPrivate, Rules: []AccessRule{
		{Priority: 10, Container: "/pci/high/", Transform: TransformReveal, Permissions: []string{"token:use"}},
		{Priority: 20, Container: "/pci/", Transform: TransformMask, Permissions: []string{"token:read", "token:use"}},
		{Priority: 30, Container: "/general/", Transform: TransformRedact, Permissions: []string{"token:read"}},
		{Priority: 40, Container: "/", Transform: TransformMask, Permissions: []string{"token:create"}},
	}}
	for _, tc := range []struct {
		name, perm, container string
		want                  string // "" means ErrForbidden
	}{
		{"exact container", "token:use", "/pci/high/", TransformReveal},
		{"sub-container", "token:use", "/pci/high/deep/", TransformReveal},
		{"parent rule covers sibling", "token:use", "/pci/low/", TransformMask},
		{"parent rule covers itself", "token:use", "/pci/", TransformMask},
		{"rule without the permission is skipped", "token:read", "/pci/high/", TransformMask},
		{"/pci/ does not cover /pcix/", "token:use", "/pcix/", ""},
		{"/pci/ does not cover /pcix/ for read", "token:read", "/pcix/high/", ""},
		{"/pci/high/ does not cover /pci/highest/", "token:use", "/pci/highest/", TransformMask},
		{"redact rule", "token:read", "/general/high/", TransformRedact},
		{"no rule grants use on general", "token:use", "/general/high/", ""},
		{"root rule", "token:create", "/anything/at/all/", TransformMask},
		{"root rule on root", "token:create", "/", TransformMask},
		{"nothing grants delete", "token:delete", "/pci/high/", ""},
		{"no matching container", "token:read", "/bank/", ""},
		{"prefix of a rule's container", "token:use", "/pc/", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := app.Authorize(tc.perm, tc.container)
			if tc.want == "" {
				if !errors.Is(err, ErrForbidden) || got != "" {
					t.Errorf("Authorize(%s, %s) = %q, %v; want ErrForbidden", tc.perm, tc.container, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Authorize(%s, %s) = %q, %v; want %q", tc.perm, tc.container, got, err, tc.want)
			}
		})
	}
}

// Rules are submitted in any order; the stored application evaluates them
// by ascending priority, and the first that matches wins.
func TestAuthorizeFirstRuleByPriorityWins(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	broad := AccessRule{Container: "/pci/", Transform: TransformReveal, Permissions: []string{"token:use"}}
	narrow := AccessRule{Container: "/PCI/High/", Transform: TransformRedact, Permissions: []string{"token:use"}}
	for _, tc := range []struct {
		name                  string
		rules                 func() []AccessRule
		wantHigh, wantSibling string
	}{
		{"narrow first by priority, submitted last", func() []AccessRule {
			b, n := broad, narrow
			b.Priority, n.Priority = 2, 1
			return []AccessRule{b, n}
		}, TransformRedact, TransformReveal},
		{"broad first by priority, submitted last", func() []AccessRule {
			b, n := broad, narrow
			b.Priority, n.Priority = 1, 2
			return []AccessRule{n, b}
		}, TransformReveal, TransformReveal},
		{"negative priority wins", func() []AccessRule {
			b, n := broad, narrow
			b.Priority, n.Priority = 0, -1
			return []AccessRule{b, n}
		}, TransformRedact, TransformReveal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, key := mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{Name: "r", Type: AppPrivate, Rules: tc.rules()})
			p, err := s.Authenticate(ctx, key.Key)
			if err != nil {
				t.Fatal(err)
			}
			for container, want := range map[string]string{"/pci/high/": tc.wantHigh, "/pci/low/": tc.wantSibling} {
				if got, err := p.Application.Authorize("token:use", container); err != nil || got != want {
					t.Errorf("Authorize(token:use, %s) = %q, %v; want %q", container, got, err, want)
				}
			}
			if _, err := p.Application.Authorize("token:use", "/pcix/"); !errors.Is(err, ErrForbidden) {
				t.Errorf("Authorize(token:use, /pcix/) = %v, want ErrForbidden", err)
			}
		})
	}
}

func TestCan(t *testing.T) {
	plain := &Application{Permissions: []string{"token:read"}}
	ruled := &Application{Rules: []AccessRule{
		{Priority: 1, Container: "/pci/", Transform: TransformMask, Permissions: []string{"token:read"}},
		{Priority: 2, Container: "/", Transform: TransformReveal, Permissions: []string{"token:use", "token:search"}},
	}}
	mgmt := &Application{Permissions: PermissionsFor(AppManagement)}
	for _, tc := range []struct {
		name string
		app  *Application
		perm string
		want bool
	}{
		{"plain held", plain, "token:read", true},
		{"plain not held", plain, "token:use", false},
		{"rule held", ruled, "token:read", true},
		{"second rule held", ruled, "token:search", true},
		{"no rule grants", ruled, "token:delete", false},
		{"management", mgmt, "application:create", true},
		{"management lacks token", mgmt, "token:read", false},
		{"empty app", &Application{}, "token:read", false},
		{"empty permission", plain, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.app.Can(tc.perm); got != tc.want {
				t.Errorf("Can(%q) = %v, want %v", tc.perm, got, tc.want)
			}
		})
	}
}

func TestPermissionsFor(t *testing.T) {
	for _, tc := range []struct {
		typ         string
		mustHave    []string
		mustNotHave []string
	}{
		{AppPublic, []string{"token:create", "token:update"}, []string{"token:read", "token:use", "tenant:read"}},
		{AppPrivate, []string{"token:create", "token:read", "token:update", "token:delete", "token:use", "token:search"}, []string{"tenant:read", "application:create"}},
		{AppManagement, []string{"tenant:read", "tenant:update", "tenant:delete", "report:read", "log:read",
			"application:create", "application:read", "application:update", "application:delete",
			"proxy:create", "proxy:read", "proxy:update", "proxy:delete",
			"reactor:create", "reactor:read", "reactor:update", "reactor:delete"}, []string{"token:read", "token:use"}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			got := PermissionsFor(tc.typ)
			if !sort.StringsAreSorted(got) {
				t.Errorf("not sorted: %v", got)
			}
			for _, p := range tc.mustHave {
				if !slices.Contains(got, p) {
					t.Errorf("missing %s", p)
				}
			}
			for _, p := range tc.mustNotHave {
				if slices.Contains(got, p) {
					t.Errorf("has %s", p)
				}
			}
			got[0] = "mutated"
			if slices.Contains(PermissionsFor(tc.typ), "mutated") {
				t.Error("PermissionsFor returns shared memory")
			}
		})
	}
	if got := PermissionsFor("admin"); got != nil {
		t.Errorf("PermissionsFor(unknown) = %v, want nil", got)
	}
}

func TestNormalizeContainer(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/", "/", true},
		{"/pci/", "/pci/", true},
		{"/PCI/High/", "/pci/high/", true},
		{"/a_b-c/0-9/", "/a_b-c/0-9/", true},
		{"", "", false},
		{"pci/", "pci/", false},
		{"/pci", "/pci", false},
		{"//", "//", false},
		{"/pci//high/", "/pci//high/", false},
		{"/p ci/", "/p ci/", false},
		{"/p.ci/", "/p.ci/", false},
		{"/pcï/", "/pcï/", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := NormalizeContainer(tc.in)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("NormalizeContainer(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
