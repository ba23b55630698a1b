package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

var keyShape = regexp.MustCompile(`^key_(test|prod)_[0-9A-Za-z]{39}$`)

func TestCreateTenantIssuesManagementKey(t *testing.T) {
	ctx := context.Background()
	s, clock := newTestStore(t)
	for _, tc := range []struct {
		typ, prefix string
	}{
		{TenantTest, "key_test_"},
		{TenantProduction, "key_prod_"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			now := clock.Peek()
			ct := mustCreateTenant(t, s, "Tenant "+tc.typ, tc.typ)

			if !strings.HasPrefix(ct.Key, tc.prefix) || !keyShape.MatchString(ct.Key) || !wellFormedKey(ct.Key) {
				t.Errorf("key %q is not a well-formed %s key", ct.Key, tc.prefix)
			}
			if _, err := uuid.Parse(ct.Tenant.ID); err != nil || !isID(ct.Tenant.ID) {
				t.Errorf("tenant id %q is not a uuid", ct.Tenant.ID)
			}
			if ct.Tenant.Type != tc.typ || ct.Tenant.Name != "Tenant "+tc.typ {
				t.Errorf("tenant = %+v", ct.Tenant)
			}
			if ct.Tenant.CreatedAt == nil || !ct.Tenant.CreatedAt.Equal(now.Truncate(time.Microsecond)) {
				t.Errorf("created_at = %v, want the clock's %v", ct.Tenant.CreatedAt, now)
			}
			for _, name := range TenantSettingNames {
				if ct.Tenant.Settings[name] != "false" {
					t.Errorf("setting %s = %q, want \"false\"", name, ct.Tenant.Settings[name])
				}
			}
			if ct.Tenant.Quotas != DefaultQuotas {
				t.Errorf("quotas = %+v, want defaults", ct.Tenant.Quotas)
			}

			p, err := s.Authenticate(ctx, ct.Key)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if p.Tenant.ID != ct.Tenant.ID || p.Tenant.Type != tc.typ || p.Tenant.Name != ct.Tenant.Name {
				t.Errorf("principal tenant = %+v", p.Tenant)
			}
			if p.Application.ID != ct.Application.ID || p.Application.Type != AppManagement || p.Application.TenantID != ct.Tenant.ID {
				t.Errorf("principal application = %+v", p.Application)
			}
			all := PermissionsFor(AppManagement)
			if !slices.Equal(p.Application.Permissions, all) {
				t.Errorf("management permissions = %v, want %v", p.Application.Permissions, all)
			}
			for _, perm := range all {
				if !p.Application.Can(perm) {
					t.Errorf("management application cannot %s", perm)
				}
			}
			keys, err := s.ListKeys(ctx, ct.Tenant.ID, ct.Application.ID)
			if err != nil || len(keys) != 1 || keys[0].ID != p.KeyID {
				t.Errorf("ListKeys = %+v, %v; want the one key %s", keys, err, p.KeyID)
			}
		})
	}
}

func TestCreateTenantValidation(t *testing.T) {
	s, _ := newTestStore(t)
	for _, tc := range []struct {
		name, tenantName, typ string
		wantFields            []string
	}{
		{"empty name", "", TenantTest, []string{"name"}},
		{"201 ascii characters", strings.Repeat("a", 201), TenantTest, []string{"name"}},
		{"201 multibyte characters", strings.Repeat("é", 201), TenantTest, []string{"name"}},
		{"200 multibyte characters", strings.Repeat("é", 200), TenantTest, nil},
		{"200 four-byte characters", strings.Repeat("🦓", 200), TenantProduction, nil},
		{"empty type", "ok", "", []string{"type"}},
		{"abbreviated type", "ok", "prod", []string{"type"}},
		{"upper-case type", "ok", "TEST", []string{"type"}},
		{"name and type", "", "staging", []string{"name", "type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := s.ListTenants(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ct, err := s.CreateTenant(context.Background(), NewTenant{Name: tc.tenantName, Type: tc.typ})
			after, _ := s.ListTenants(context.Background())
			if tc.wantFields == nil {
				if err != nil {
					t.Fatalf("CreateTenant: %v", err)
				}
				if ct.Tenant.Name != tc.tenantName || len(after) != len(before)+1 {
					t.Errorf("tenant name %q, %d tenants after", ct.Tenant.Name, len(after))
				}
				return
			}
			if got := validationFields(t, err); !slices.Equal(got, tc.wantFields) {
				t.Errorf("invalid fields = %v, want %v", got, tc.wantFields)
			}
			if len(after) != len(before) {
				t.Errorf("a refused tenant was stored: %d tenants -> %d", len(before), len(after))
			}
		})
	}
}

func TestUpdateTenant(t *testing.T) {
	ctx := context.Background()
	s, clock := newTestStore(t)
	for _, tc := range []struct {
		name       string
		update     TenantUpdate
		wantFields []string
		want       map[string]string // settings after a successful update
	}{
		{"unknown setting", TenantUpdate{Name: "n", Settings: map[string]string{"bogus": "true"}}, []string{"settings.bogus"}, nil},
		{"upper-case TRUE", TenantUpdate{Name: "n", Settings: map[string]string{"fingerprint_tokens": "TRUE"}}, []string{"settings.fingerprint_tokens"}, nil},
		{"numeric value", TenantUpdate{Name: "n", Settings: map[string]string{"deduplicate_tokens": "1"}}, []string{"settings.deduplicate_tokens"}, nil},
		{"empty value", TenantUpdate{Name: "n", Settings: map[string]string{"disable_ephemeral_proxy": ""}}, []string{"settings.disable_ephemeral_proxy"}, nil},
		{"empty name", TenantUpdate{Name: ""}, []string{"name"}, nil},
		{"201 character name", TenantUpdate{Name: strings.Repeat("x", 201)}, []string{"name"}, nil},
		{"one bad among good", TenantUpdate{Name: "n", Settings: map[string]string{"fingerprint_tokens": "true", "nope": "false"}}, []string{"settings.nope"}, nil},
		{"rename only keeps settings", TenantUpdate{Name: "Renamed"}, nil,
			map[string]string{"deduplicate_tokens": "false", "disable_ephemeral_proxy": "false", "fingerprint_tokens": "false"}},
		{"one setting, others kept", TenantUpdate{Name: "n", Settings: map[string]string{"fingerprint_tokens": "true"}}, nil,
			map[string]string{"deduplicate_tokens": "false", "disable_ephemeral_proxy": "false", "fingerprint_tokens": "true"}},
		{"two settings", TenantUpdate{Name: "n", Settings: map[string]string{"deduplicate_tokens": "true", "disable_ephemeral_proxy": "true"}}, nil,
			map[string]string{"deduplicate_tokens": "true", "disable_ephemeral_proxy": "true", "fingerprint_tokens": "false"}},
		{"200 multibyte name", TenantUpdate{Name: strings.Repeat("ü", 200)}, nil,
			map[string]string{"deduplicate_tokens": "false", "disable_ephemeral_proxy": "false", "fingerprint_tokens": "false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := mustCreateTenant(t, s, "Original", TenantTest)
			id := ct.Tenant.ID
			now := clock.Peek()
			got, err := s.UpdateTenant(ctx, id, "actor-1", tc.update)
			stored, gerr := s.GetTenant(ctx, id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if tc.wantFields != nil {
				if fields := validationFields(t, err); !slices.Equal(fields, tc.wantFields) {
					t.Errorf("invalid fields = %v, want %v", fields, tc.wantFields)
				}
				if stored.Name != "Original" || !maps.Equal(stored.Settings, ct.Tenant.Settings) || stored.ModifiedAt != nil {
					t.Errorf("a refused update changed the tenant: %+v", stored)
				}
				return
			}
			if err != nil {
				t.Fatalf("UpdateTenant: %v", err)
			}
			for _, tn := range []*Tenant{got, stored} {
				if tn.Name != tc.update.Name || !maps.Equal(tn.Settings, tc.want) {
					t.Errorf("tenant = name %q settings %v, want %q %v", tn.Name, tn.Settings, tc.update.Name, tc.want)
				}
				if tn.ModifiedBy != "actor-1" || tn.ModifiedAt == nil || tn.ModifiedAt.Before(now) {
					t.Errorf("modified = %q at %v, want actor-1 at or after %v", tn.ModifiedBy, tn.ModifiedAt, now)
				}
				if tn.Type != TenantTest || !tn.CreatedAt.Equal(ct.Tenant.CreatedAt.Time) || tn.Quotas != DefaultQuotas {
					t.Errorf("update changed fields it does not name: %+v", tn)
				}
			}
		})
	}
}

func TestTenantUnknownID(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	mustCreateTenant(t, s, "Exists", TenantTest)
	for _, id := range []string{uuid.NewString(), "", "not-a-uuid", "../tenant"} {
		t.Run(id, func(t *testing.T) {
			if _, err := s.GetTenant(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetTenant error = %v, want ErrNotFound", err)
			}
			if _, err := s.UpdateTenant(ctx, id, "a", TenantUpdate{Name: "x"}); !errors.Is(err, ErrNotFound) {
				t.Errorf("UpdateTenant error = %v, want ErrNotFound", err)
			}
			if err := s.DeleteTenant(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("DeleteTenant error = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestListTenantsOldestFirst(t *testing.T) {
	s, _ := newTestStore(t)
	var want []string
	for _, name := range []string{"c", "a", "b"} {
		want = append(want, mustCreateTenant(t, s, name, TenantTest).Tenant.ID)
	}
	got, err := s.ListTenants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tn := range got {
		ids = append(ids, tn.ID)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("ListTenants = %v, want %v", ids, want)
	}
}

func TestDeleteTenant(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, Options{Dir: dir, Now: newFakeClock().Now})

	type fixture struct {
		ct     *CreatedTenant
		appIDs []string
		keys   []string
	}
	build := func(name string) fixture {
		ct := mustCreateTenant(t, s, name, TenantTest)
		f := fixture{ct: ct, appIDs: []string{ct.Application.ID}, keys: []string{ct.Key}}
		for i := range 3 {
			app, k := mustCreateApp(t, s, ct.Tenant.ID, privateApp("app"))
			f.appIDs = append(f.appIDs, app.ID)
			f.keys = append(f.keys, k.Key)
			if i == 0 {
				extra, err := s.CreateKey(ctx, ct.Tenant.ID, app.ID, "actor")
				if err != nil {
					t.Fatal(err)
				}
				f.keys = append(f.keys, extra.Key)
			}
		}
		return f
	}
	a, b := build("A"), build("B")
	bBefore := kvKeys(t, s, "v1/t/"+b.ct.Tenant.ID+"/")

	if err := s.DeleteTenant(ctx, a.ct.Tenant.ID); err != nil {
		t.Fatalf("DeleteTenant: %v", err)
	}

	checkGone := func(t *testing.T, s *Store) {
		aID := a.ct.Tenant.ID
		for i, k := range a.keys {
			if _, err := s.Authenticate(ctx, k); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("key %d of the deleted tenant: Authenticate error = %v, want ErrUnauthenticated", i, err)
			}
		}
		if _, err := s.GetTenant(ctx, aID); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetTenant error = %v, want ErrNotFound", err)
		}
		if _, err := s.ListApplications(ctx, aID); !errors.Is(err, ErrNotFound) {
			t.Errorf("ListApplications error = %v, want ErrNotFound", err)
		}
		if _, err := s.GetApplication(ctx, aID, a.appIDs[1]); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetApplication error = %v, want ErrNotFound", err)
		}
		if _, _, err := s.CreateApplication(ctx, aID, "x", privateApp("late")); !errors.Is(err, ErrNotFound) {
			t.Errorf("CreateApplication error = %v, want ErrNotFound", err)
		}
		if err := s.DeleteTenant(ctx, aID); !errors.Is(err, ErrNotFound) {
			t.Errorf("second DeleteTenant error = %v, want ErrNotFound", err)
		}
		tenants, err := s.ListTenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tenants) != 1 || tenants[0].ID != b.ct.Tenant.ID {
			t.Errorf("ListTenants = %v, want only tenant B", tenants)
		}
		for _, prefix := range []string{"v1/t/" + aID + "/", "v1/dek/" + aID + "/", "v1/tenant/" + aID} {
			if left := kvKeys(t, s, prefix); len(left) != 0 {
				t.Errorf("%d keys left under %s: %v", len(left), prefix, left)
			}
		}
		err = s.kv.View(ctx, func(r Reader) error {
			return r.Scan([]byte("v1/apikey/"), nil, func(k, v []byte) error {
				var e keyIndexEntry
				if err := json.Unmarshal(v, &e); err != nil {
					return err
				}
				if e.TenantID == aID {
					t.Errorf("key index %s still points at the deleted tenant", k)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}

		// Tenant B is untouched.
		if got := kvKeys(t, s, "v1/t/"+b.ct.Tenant.ID+"/"); !slices.Equal(got, bBefore) {
			t.Errorf("tenant B's records changed: %v -> %v", bBefore, got)
		}
		if _, err := s.GetTenant(ctx, b.ct.Tenant.ID); err != nil {
			t.Errorf("GetTenant(B): %v", err)
		}
		for i, k := range b.keys {
			if p, err := s.Authenticate(ctx, k); err != nil || p.Tenant.ID != b.ct.Tenant.ID {
				t.Errorf("key %d of tenant B: Authenticate = %v, %v", i, p, err)
			}
		}
		apps, err := s.ListApplications(ctx, b.ct.Tenant.ID)
		if err != nil || len(apps) != len(b.appIDs) {
			t.Errorf("ListApplications(B) = %d apps, %v; want %d", len(apps), err, len(b.appIDs))
		}
	}
	t.Run("same process", func(t *testing.T) { checkGone(t, s) })

	closeTestStore(t, s)
	s = openTestStore(t, Options{Dir: dir})
	t.Run("after reopen", func(t *testing.T) { checkGone(t, s) })
}

// A request that began before a tenant was deleted (its read snapshot
// still shows the data key) must not bring the deleted tenant's data key
// back: once DeleteTenant returns, the tenant accepts no new records.
func TestDeletedTenantStaysDeletedAfterConcurrentColdRead(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStore(t)
	ct := mustCreateTenant(t, s, "Doomed", TenantTest)
	id := ct.Tenant.ID
	s.keys.forget(id) // a cold cache, as after a restart

	started, proceed := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		// What Authenticate does for a request that arrived just before the
		// delete: a snapshot read of the tenant's data keys.
		done <- s.kv.View(ctx, func(r Reader) error {
			close(started)
			<-proceed
			_, err := s.tenantKeysFor(r, id)
			return err
		})
	}()
	<-started
	if err := s.DeleteTenant(ctx, id); err != nil {
		t.Fatalf("DeleteTenant: %v", err)
	}
	close(proceed)
	// Badger's snapshot is the View's start, so the read still finds the
	// data key; PostgreSQL's is its first read, which finds the tenant
	// gone. Either way nothing may bring the key back.
	if err := <-done; err != nil && !(testEngine == "postgres" && errors.Is(err, ErrNotFound)) {
		t.Fatalf("snapshot read: %v", err)
	}

	app, _, err := s.CreateApplication(ctx, id, "actor", ApplicationInput{Name: "orphan", Type: AppPrivate, CreateKey: boolPtr(false)})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("CreateApplication in the deleted tenant: app %v, error %v; want ErrNotFound", app, err)
	}
	if apps, err := s.ListApplications(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListApplications of the deleted tenant = %d apps, %v; want ErrNotFound", len(apps), err)
	}
	if left := kvKeys(t, s, "v1/t/"+id+"/"); len(left) != 0 {
		t.Errorf("records written for the deleted tenant: %v", left)
	}
}

// A tenant delete interrupted after its keys were destroyed (a crash
// before the bulk delete finished) is finished on the next open.
func TestResumeInterruptedTenantDelete(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, Options{Dir: dir})
	ct := mustCreateTenant(t, s, "Interrupted", TenantTest)
	mustCreateApp(t, s, ct.Tenant.ID, ApplicationInput{Name: "left behind", Type: AppPrivate, Permissions: []string{"token:read"}})
	// what DeleteTenant commits before its bulk delete
	if err := s.kv.Update(context.Background(), func(w Writer) error {
		if err := w.Put(tenantDeletionKey(ct.Tenant.ID), nil, 0); err != nil {
			return err
		}
		return w.Delete(tenantKey(ct.Tenant.ID))
	}); err != nil {
		t.Fatal(err)
	}
	closeTestStore(t, s)

	s = openTestStore(t, Options{Dir: dir})
	if err := s.resumeTenantDeletions(context.Background()); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := s.kv.View(context.Background(), func(r Reader) error {
		for _, p := range [][]byte{tenantDataPrefix(ct.Tenant.ID), tenantDeletionPrefix()} {
			if err := r.Scan(p, nil, func(k, _ []byte) error { left = append(left, string(k)); return nil }); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("records of the deleted tenant remain: %v", left)
	}
}
