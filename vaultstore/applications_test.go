package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

func TestCreateApplicationEachType(t *testing.T) {
	ctx := context.Background()
	s, clock := newTestStore(t)
	for _, tenantType := range []string{TenantTest, TenantProduction} {
		ct := mustCreateTenant(t, s, "T", tenantType)
		prefix := "key_" + keyEnv(tenantType) + "_"
		for _, tc := range []struct {
			name      string
			in        ApplicationInput
			wantPerms []string
			wantKey   bool
		}{
			{"private", ApplicationInput{Name: "Backend", Type: AppPrivate, Permissions: []string{"token:use", "token:read", "token:use"}},
				[]string{"token:read", "token:use"}, true},
			{"public", ApplicationInput{Name: "Browser", Type: AppPublic, Permissions: []string{"token:update", "token:create"}},
				[]string{"token:create", "token:update"}, true},
			{"management", ApplicationInput{Name: "Ops", Type: AppManagement, Permissions: []string{"proxy:read", "application:create"}},
				[]string{"application:create", "proxy:read"}, true},
			{"all management permissions", ApplicationInput{Name: "Root", Type: AppManagement, Permissions: PermissionsFor(AppManagement)},
				PermissionsFor(AppManagement), true},
			{"no permissions", ApplicationInput{Name: "Empty", Type: AppPrivate}, []string{}, true},
			{"without key", ApplicationInput{Name: "Keyless", Type: AppPrivate, Permissions: []string{"token:read"}, CreateKey: boolPtr(false)},
				[]string{"token:read"}, false},
			{"explicit key", ApplicationInput{Name: "Keyed", Type: AppPublic, Permissions: []string{"token:create"}, CreateKey: boolPtr(true)},
				[]string{"token:create"}, true},
		} {
			t.Run(tenantType+"/"+tc.name, func(t *testing.T) {
				now := clock.Peek()
				app, key, err := s.CreateApplication(ctx, ct.Tenant.ID, "actor-7", tc.in)
				if err != nil {
					t.Fatalf("CreateApplication: %v", err)
				}
				if !isID(app.ID) || app.TenantID != ct.Tenant.ID || app.Name != tc.in.Name || app.Type != tc.in.Type {
					t.Errorf("application = %+v", app)
				}
				if !slices.Equal(app.Permissions, tc.wantPerms) || app.Permissions == nil {
					t.Errorf("permissions = %#v, want %#v", app.Permissions, tc.wantPerms)
				}
				if app.CreatedBy != "actor-7" || app.CreatedAt == nil || app.CreatedAt.Before(now) {
					t.Errorf("created = %q at %v, want actor-7 at or after %v", app.CreatedBy, app.CreatedAt, now)
				}
				got, err := s.GetApplication(ctx, ct.Tenant.ID, app.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !sameJSON(t, got, app) {
					t.Errorf("GetApplication = %+v, want %+v", got, app)
				}
				keys, err := s.ListKeys(ctx, ct.Tenant.ID, app.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.wantKey {
					if key != nil || len(keys) != 0 {
						t.Errorf("create_key false issued %v (%d keys listed)", key, len(keys))
					}
					return
				}
				if key == nil {
					t.Fatal("no key issued")
				}
				if !strings.HasPrefix(key.Key, prefix) || !wellFormedKey(key.Key) || !isID(key.ID) || key.CreatedBy != "actor-7" {
					t.Errorf("issued key = %+v, want a well-formed %s key", key, prefix)
				}
				if len(keys) != 1 || keys[0].ID != key.ID {
					t.Errorf("ListKeys = %+v, want key %s", keys, key.ID)
				}
				p, err := s.Authenticate(ctx, key.Key)
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if p.Tenant.ID != ct.Tenant.ID || p.Application.ID != app.ID || p.KeyID != key.ID || !slices.Equal(p.Application.Permissions, tc.wantPerms) {
					t.Errorf("principal = %+v / %+v / %s", p.Tenant, p.Application, p.KeyID)
				}
			})
		}
	}
}

func TestCreateApplicationValidation(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	rule := func(prio int, container string) AccessRule {
		return AccessRule{Priority: prio, Container: container, Transform: TransformMask, Permissions: []string{"token:read"}}
	}
	for _, tc := range []struct {
		name       string
		in         ApplicationInput
		wantFields []string
	}{
		{"empty name", ApplicationInput{Name: "", Type: AppPrivate}, []string{"name"}},
		{"201 character name", ApplicationInput{Name: strings.Repeat("n", 201), Type: AppPrivate}, []string{"name"}},
		{"201 multibyte name", ApplicationInput{Name: strings.Repeat("ß", 201), Type: AppPrivate}, []string{"name"}},
		{"unknown type", ApplicationInput{Name: "a", Type: "admin"}, []string{"type"}},
		{"empty type", ApplicationInput{Name: "a", Type: ""}, []string{"type"}},
		{"upper-case type", ApplicationInput{Name: "a", Type: "Private"}, []string{"type"}},
		{"management permission on private", ApplicationInput{Name: "a", Type: AppPrivate, Permissions: []string{"tenant:read"}}, []string{"permissions[0]"}},
		// The index names the element as submitted, not after sorting.
		{"bad permission second", ApplicationInput{Name: "a", Type: AppPrivate, Permissions: []string{"token:read", "tenant:read"}}, []string{"permissions[1]"}},
		{"bad permission last of three", ApplicationInput{Name: "a", Type: AppPrivate, Permissions: []string{"token:use", "token:read", "application:create"}}, []string{"permissions[2]"}},
		{"token:read on public", ApplicationInput{Name: "a", Type: AppPublic, Permissions: []string{"token:create", "token:read"}}, []string{"permissions[1]"}},
		{"token:use on management", ApplicationInput{Name: "a", Type: AppManagement, Permissions: []string{"token:use"}}, []string{"permissions[0]"}},
		{"unknown permission", ApplicationInput{Name: "a", Type: AppPrivate, Permissions: []string{"token:*"}}, []string{"permissions[0]"}},
		{"management with rules", ApplicationInput{Name: "a", Type: AppManagement, Rules: []AccessRule{rule(1, "/pci/")}}, []string{"rules"}},
		{"duplicate priority", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{rule(1, "/a/"), rule(2, "/b/"), rule(1, "/c/")}}, []string{"rules[2].priority"}},
		{"container without slashes", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{rule(1, "pci")}}, []string{"rules[0].container"}},
		{"container without trailing slash", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{rule(1, "/ok/"), rule(2, "/pci")}}, []string{"rules[1].container"}},
		{"empty container", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{rule(1, "")}}, []string{"rules[0].container"}},
		{"empty segment", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{rule(1, "/pci//high/")}}, []string{"rules[0].container"}},
		{"space in container", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{rule(1, "/p ci/")}}, []string{"rules[0].container"}},
		{"dot in container", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{rule(1, "/../")}}, []string{"rules[0].container"}},
		{"bad transform", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{{Priority: 1, Container: "/", Transform: "show", Permissions: []string{"token:read"}}}}, []string{"rules[0].transform"}},
		{"rule without permissions", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{{Priority: 1, Container: "/", Transform: TransformMask}}}, []string{"rules[0].permissions"}},
		{"rule permission not allowed for public", ApplicationInput{Name: "a", Type: AppPublic, Rules: []AccessRule{{Priority: 1, Container: "/", Transform: TransformMask, Permissions: []string{"token:create", "token:use"}}}}, []string{"rules[0].permissions[1]"}},
		{"long rule description", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{{Description: strings.Repeat("d", 201), Priority: 1, Container: "/", Transform: TransformMask, Permissions: []string{"token:read"}}}}, []string{"rules[0].description"}},
		{"several problems", ApplicationInput{Name: "", Type: AppPrivate, Permissions: []string{"proxy:read"}, Rules: []AccessRule{rule(1, "/x"), rule(1, "/y/")}},
			[]string{"name", "permissions[0]", "rules[0].container", "rules[1].priority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := s.ListApplications(ctx, ct.Tenant.ID)
			if err != nil {
				t.Fatal(err)
			}
			app, key, err := s.CreateApplication(ctx, ct.Tenant.ID, "actor", tc.in)
			if app != nil || key != nil {
				t.Errorf("refused create returned app %v key %v", app, key)
			}
			if got := validationFields(t, err); !slices.Equal(got, tc.wantFields) {
				t.Errorf("invalid fields = %v, want %v (%v)", got, tc.wantFields, err)
			}
			after, _ := s.ListApplications(ctx, ct.Tenant.ID)
			if len(after) != len(before) {
				t.Errorf("a refused application was stored")
			}
		})
	}
}

// ValidationError promises that messages never quote submitted values.
func TestValidationMessagesDoNotQuoteInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	const secret = "4111111111111111"
	for _, tc := range []struct {
		name string
		in   ApplicationInput
	}{
		{"permission", ApplicationInput{Name: "a", Type: AppPrivate, Permissions: []string{"token:" + secret}}},
		{"rule permission", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{{Priority: 1, Container: "/", Transform: TransformMask, Permissions: []string{secret}}}}},
		{"container", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{{Priority: 1, Container: "/" + secret + " /", Transform: TransformMask, Permissions: []string{"token:read"}}}}},
		{"transform", ApplicationInput{Name: "a", Type: AppPrivate, Rules: []AccessRule{{Priority: 1, Container: "/", Transform: secret, Permissions: []string{"token:read"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CreateApplication(ctx, ct.Tenant.ID, "actor", tc.in)
			var v *ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("error %v is not a ValidationError", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Error() quotes the submitted value: %q", err.Error())
			}
			for field, msgs := range v.Fields {
				for _, m := range msgs {
					if strings.Contains(m, secret) {
						t.Errorf("message on %s quotes the submitted value: %q", field, m)
					}
				}
			}
		})
	}
}

func TestCreateApplicationNormalizesRules(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	in := ApplicationInput{Name: "ruled", Type: AppPrivate, Rules: []AccessRule{
		{Description: "c", Priority: 30, Container: "/General/", Transform: TransformRedact, Permissions: []string{"token:read"}},
		{Description: "a", Priority: -5, Container: "/PCI/High/", Transform: TransformReveal, Permissions: []string{"token:use"}},
		{Description: "b", Priority: 10, Container: "/Bank_Accounts/US-1/", Transform: TransformMask, Permissions: []string{"token:read", "token:search"}},
		{Description: "d", Priority: 31, Container: "/", Transform: TransformMask, Permissions: []string{"token:create"}},
	}}
	want := []struct {
		desc, container string
		prio            int
	}{{"a", "/pci/high/", -5}, {"b", "/bank_accounts/us-1/", 10}, {"c", "/general/", 30}, {"d", "/", 31}}

	app, key := mustCreateApp(t, s, ct.Tenant.ID, in)
	stored, err := s.GetApplication(ctx, ct.Tenant.ID, app.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(ctx, key.Key)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*Application{"returned": app, "stored": stored, "authenticated": p.Application} {
		t.Run(name, func(t *testing.T) {
			if len(got.Rules) != len(want) {
				t.Fatalf("%d rules, want %d", len(got.Rules), len(want))
			}
			for i, w := range want {
				r := got.Rules[i]
				if r.Description != w.desc || r.Container != w.container || r.Priority != w.prio {
					t.Errorf("rule %d = %+v, want %s %s %d", i, r, w.desc, w.container, w.prio)
				}
			}
		})
	}
}

// The caller's input is not rewritten behind its back, and the returned
// application does not share memory with it.
func TestCreateApplicationLeavesInputAlone(t *testing.T) {
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	rules := []AccessRule{
		{Priority: 2, Container: "/PCI/", Transform: TransformMask, Permissions: []string{"token:read"}},
		{Priority: 1, Container: "/Bank/", Transform: TransformMask, Permissions: []string{"token:read"}},
	}
	perms := []string{"token:use", "token:read"}
	app, _ := mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{Name: "a", Type: AppPrivate, Permissions: perms, Rules: rules})
	if rules[0].Container != "/PCI/" || rules[1].Container != "/Bank/" || rules[0].Priority != 2 {
		t.Errorf("CreateApplication rewrote the caller's rules: %+v", rules)
	}
	if perms[0] != "token:use" {
		t.Errorf("CreateApplication rewrote the caller's permissions: %v", perms)
	}
	rules[0].Container = "/changed/"
	if app.Rules[0].Container == "/changed/" || app.Rules[1].Container == "/changed/" {
		t.Errorf("the returned application shares its rules with the input")
	}
}

func TestUpdateApplication(t *testing.T) {
	ctx := context.Background()
	s, clock := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	for _, tc := range []struct {
		name       string
		typ        string
		in         ApplicationInput
		wantFields []string
		wantPerms  []string
	}{
		{"rename and regrant", AppPrivate, ApplicationInput{Name: "New", Permissions: []string{"token:delete", "token:create"}}, nil, []string{"token:create", "token:delete"}},
		{"same type given", AppPublic, ApplicationInput{Name: "New", Type: AppPublic, Permissions: []string{"token:update"}}, nil, []string{"token:update"}},
		{"type change", AppPrivate, ApplicationInput{Name: "New", Type: AppPublic}, []string{"type"}, nil},
		{"permission not allowed for stored type", AppPublic, ApplicationInput{Name: "New", Permissions: []string{"token:use"}}, []string{"permissions[0]"}, nil},
		{"rules on management", AppManagement, ApplicationInput{Name: "New", Rules: []AccessRule{{Priority: 1, Container: "/", Transform: TransformMask, Permissions: []string{"tenant:read"}}}}, []string{"rules"}, nil},
		{"empty name", AppPrivate, ApplicationInput{Name: ""}, []string{"name"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig, key := mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{Name: "Old", Type: tc.typ})
			now := clock.Peek()
			got, err := s.UpdateApplication(ctx, ct.Tenant.ID, orig.ID, "actor-2", tc.in)
			stored, gerr := s.GetApplication(ctx, ct.Tenant.ID, orig.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if tc.wantFields != nil {
				if fields := validationFields(t, err); !slices.Equal(fields, tc.wantFields) {
					t.Errorf("invalid fields = %v, want %v", fields, tc.wantFields)
				}
				if !sameJSON(t, stored, orig) {
					t.Errorf("refused update changed the application: %+v", stored)
				}
				return
			}
			if err != nil {
				t.Fatalf("UpdateApplication: %v", err)
			}
			p, err := s.Authenticate(ctx, key.Key)
			if err != nil {
				t.Fatalf("existing key after update: %v", err)
			}
			for name, a := range map[string]*Application{"returned": got, "stored": stored, "authenticated": p.Application} {
				if a.Name != tc.in.Name || a.Type != tc.typ || !slices.Equal(a.Permissions, tc.wantPerms) {
					t.Errorf("%s = %+v", name, a)
				}
				if a.ModifiedBy != "actor-2" || a.ModifiedAt == nil || a.ModifiedAt.Before(now) || !a.CreatedAt.Equal(orig.CreatedAt.Time) {
					t.Errorf("%s audit fields = %+v", name, a)
				}
			}
		})
	}
}

func TestApplicationKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	tid := ct.Tenant.ID
	app, first := mustCreateApp(t, s, tid, privateApp("keys"))
	other, otherKey := mustCreateApp(t, s, tid, privateApp("other"))

	second, err := s.CreateKey(ctx, tid, app.ID, "actor-3")
	if err != nil {
		t.Fatal(err)
	}
	if !wellFormedKey(second.Key) || second.Key == first.Key || second.ID == first.ID || second.CreatedBy != "actor-3" {
		t.Errorf("second key = %+v", second)
	}
	third, err := s.CreateKey(ctx, tid, app.ID, "actor-3")
	if err != nil {
		t.Fatal(err)
	}

	keys, err := s.ListKeys(ctx, tid, app.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	if want := []string{first.ID, second.ID, third.ID}; !slices.Equal(ids, want) {
		t.Errorf("ListKeys ids = %v, want oldest first %v", ids, want)
	}
	if dump := fmt.Sprintf("%+v", keys); strings.Contains(dump, first.Key) || strings.Contains(dump, second.Key[9:]) {
		t.Errorf("ListKeys exposes a secret: %s", dump)
	}

	if err := s.DeleteKey(ctx, tid, app.ID, second.ID, ""); err != nil {
		t.Fatalf("DeleteKey: %v", err)
	}
	for _, tc := range []struct {
		name    string
		key     string
		wantApp string // "" means revoked
	}{
		{"deleted key", second.Key, ""},
		{"first key of the same app", first.Key, app.ID},
		{"third key of the same app", third.Key, app.ID},
		{"key of another app", otherKey.Key, other.ID},
		{"management key", ct.Key, ct.Application.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Authenticate(ctx, tc.key)
			if tc.wantApp == "" {
				if !errors.Is(err, ErrUnauthenticated) {
					t.Errorf("Authenticate = %v, %v; want ErrUnauthenticated", p, err)
				}
				return
			}
			if err != nil || p.Application.ID != tc.wantApp {
				t.Errorf("Authenticate = %v, %v; want app %s", p, err, tc.wantApp)
			}
		})
	}
	keys, _ = s.ListKeys(ctx, tid, app.ID)
	if len(keys) != 2 || keys[0].ID != first.ID || keys[1].ID != third.ID {
		t.Errorf("ListKeys after delete = %+v", keys)
	}
	for _, tc := range []struct {
		name         string
		appID, keyID string
	}{
		{"already deleted", app.ID, second.ID},
		{"key of another app", app.ID, otherKey.ID},
		{"unknown key", app.ID, uuid.NewString()},
		{"unknown app", uuid.NewString(), first.ID},
	} {
		t.Run("DeleteKey "+tc.name, func(t *testing.T) {
			if err := s.DeleteKey(ctx, tid, tc.appID, tc.keyID, ""); !errors.Is(err, ErrNotFound) {
				t.Errorf("DeleteKey error = %v, want ErrNotFound", err)
			}
		})
	}
	if _, err := s.Authenticate(ctx, otherKey.Key); err != nil {
		t.Errorf("a refused DeleteKey revoked another app's key: %v", err)
	}
	if _, err := s.CreateKey(ctx, tid, uuid.NewString(), "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("CreateKey for an unknown app: %v, want ErrNotFound", err)
	}
}

func TestDeleteApplicationRevokesAllKeys(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantProduction)
	tid := ct.Tenant.ID
	app, k1 := mustCreateApp(t, s, tid, privateApp("doomed"))
	keys := []string{k1.Key}
	for range 3 {
		k, err := s.CreateKey(ctx, tid, app.ID, "a")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.Key)
	}
	keeper, keeperKey := mustCreateApp(t, s, tid, privateApp("keeper"))

	if err := s.DeleteApplication(ctx, tid, app.ID, ""); err != nil {
		t.Fatalf("DeleteApplication: %v", err)
	}
	for i, k := range keys {
		if _, err := s.Authenticate(ctx, k); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("key %d after DeleteApplication: %v, want ErrUnauthenticated", i, err)
		}
	}
	if _, err := s.GetApplication(ctx, tid, app.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetApplication: %v, want ErrNotFound", err)
	}
	if _, err := s.ListKeys(ctx, tid, app.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListKeys: %v, want ErrNotFound", err)
	}
	if err := s.DeleteApplication(ctx, tid, app.ID, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeleteApplication: %v, want ErrNotFound", err)
	}
	if left := kvKeys(t, s, string(appKeyPrefix(tid, app.ID))); len(left) != 0 {
		t.Errorf("key records left: %v", left)
	}
	if p, err := s.Authenticate(ctx, keeperKey.Key); err != nil || p.Application.ID != keeper.ID {
		t.Errorf("other app's key: %v, %v", p, err)
	}
	apps, err := s.ListApplications(ctx, tid)
	if err != nil || len(apps) != 2 {
		t.Errorf("ListApplications = %d, %v; want management + keeper", len(apps), err)
	}
}

func TestApplicationTenantIsolation(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	a := mustCreateTenant(t, s, "A", TenantTest)
	b := mustCreateTenant(t, s, "B", TenantTest)
	appB, keyB := mustCreateApp(t, s, b.Tenant.ID, privateApp("b-app"))
	mustCreateApp(t, s, a.Tenant.ID, privateApp("a-app"))
	aID := a.Tenant.ID
	before, err := s.GetApplication(ctx, b.Tenant.ID, appB.ID)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"GetApplication", func() error { _, err := s.GetApplication(ctx, aID, appB.ID); return err }},
		{"UpdateApplication", func() error {
			_, err := s.UpdateApplication(ctx, aID, appB.ID, "x", ApplicationInput{Name: "hijacked", Permissions: []string{"token:use"}})
			return err
		}},
		{"DeleteApplication", func() error { return s.DeleteApplication(ctx, aID, appB.ID, "") }},
		{"ListKeys", func() error { _, err := s.ListKeys(ctx, aID, appB.ID); return err }},
		{"CreateKey", func() error { _, err := s.CreateKey(ctx, aID, appB.ID, "x"); return err }},
		{"DeleteKey", func() error { return s.DeleteKey(ctx, aID, appB.ID, keyB.ID, "") }},
		{"GetApplication of B's management app", func() error { _, err := s.GetApplication(ctx, aID, b.Application.ID); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrNotFound) {
				t.Errorf("error = %v, want ErrNotFound", err)
			}
		})
	}

	after, err := s.GetApplication(ctx, b.Tenant.ID, appB.ID)
	if err != nil || !sameJSON(t, after, before) {
		t.Errorf("B's application changed: %+v, %v", after, err)
	}
	if p, err := s.Authenticate(ctx, keyB.Key); err != nil || p.Tenant.ID != b.Tenant.ID {
		t.Errorf("B's key: %v, %v", p, err)
	}
	if keys, _ := s.ListKeys(ctx, b.Tenant.ID, appB.ID); len(keys) != 1 {
		t.Errorf("B's app has %d keys, want 1", len(keys))
	}
	appsA, err := s.ListApplications(ctx, aID)
	if err != nil {
		t.Fatal(err)
	}
	if len(appsA) != 2 {
		t.Errorf("ListApplications(A) = %d apps, want 2", len(appsA))
	}
	for _, app := range appsA {
		if app.TenantID != aID || app.ID == appB.ID || app.ID == b.Application.ID {
			t.Errorf("ListApplications(A) includes %+v", app)
		}
	}
}

func TestApplicationNonUUIDIDs(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "T", TenantTest)
	tid := ct.Tenant.ID
	app, key := mustCreateApp(t, s, tid, privateApp("x"))
	for _, id := range []string{
		"",
		"x",
		"../../dek",
		"app/" + app.ID,
		app.ID + "/",
		strings.ToUpper(app.ID),
		"{" + app.ID + "}",
		"urn:uuid:" + app.ID,
		strings.ReplaceAll(app.ID, "-", ""),
		strings.Repeat("z", 36),
		app.ID[:35],
	} {
		t.Run(id, func(t *testing.T) {
			checks := map[string]error{}
			_, checks["GetApplication"] = s.GetApplication(ctx, tid, id)
			_, checks["UpdateApplication"] = s.UpdateApplication(ctx, tid, id, "a", ApplicationInput{Name: "n"})
			checks["DeleteApplication"] = s.DeleteApplication(ctx, tid, id, "")
			_, checks["ListKeys"] = s.ListKeys(ctx, tid, id)
			_, checks["CreateKey"] = s.CreateKey(ctx, tid, id, "a")
			checks["DeleteKey(app id)"] = s.DeleteKey(ctx, tid, id, key.ID, "")
			checks["DeleteKey(key id)"] = s.DeleteKey(ctx, tid, app.ID, id, "")
			for op, err := range checks {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("%s error = %v, want ErrNotFound", op, err)
				}
			}
		})
	}
	if p, err := s.Authenticate(ctx, key.Key); err != nil || p.Application.ID != app.ID {
		t.Errorf("the application was harmed: %v, %v", p, err)
	}
}

func TestConcurrentCreateApplications(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "Busy", TenantTest)
	s.keys.forget(ct.Tenant.ID) // start cold so the goroutines race to load the data key too

	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	ids := make([]string, n)
	keys := make([]string, n)
	for i := range n {
		wg.Go(func() {
			app, key, err := s.CreateApplication(ctx, ct.Tenant.ID, "actor", privateApp(fmt.Sprintf("app-%d", i)))
			errs[i] = err
			if err == nil {
				ids[i], keys[i] = app.ID, key.Key
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
	apps, err := s.ListApplications(ctx, ct.Tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(apps) != n+1 {
		t.Fatalf("ListApplications = %d, want %d", len(apps), n+1)
	}
	listed := map[string]bool{}
	for _, a := range apps {
		listed[a.ID] = true
	}
	for i, id := range ids {
		if !listed[id] {
			t.Errorf("app %d (%s) not listed", i, id)
		}
	}
	for i, k := range keys {
		if p, err := s.Authenticate(ctx, k); err != nil || p.Application.ID != ids[i] {
			t.Errorf("key of app %d: %v, %v", i, p, err)
		}
	}
}
