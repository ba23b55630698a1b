package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// A session lets a front end act for a short while with rights a back end
// grants it, without holding a real API key. A public application creates
// it (POST /sessions) and gets a session key and a nonce; it hands the
// nonce to its back end, whose private or management application
// authorizes the session (POST /sessions/authorize) with permissions or
// access rules. Until it expires the session key then works as an API
// key with those rights, and never more than the authorizing application
// holds at the time of each call: a call needs both the session's grant
// and the authorizer's, and the less revealing transform of the two
// applies.
//
// A session key reads key_<env>_sess_<payload><checksum>, with the same
// payload and checksum as an API key; only its SHA-256 digest is stored,
// as is the nonce's. Every record a session is made of expires with it
// (a time to live in the engine), and every use checks the expiry against
// the vault's clock.

// Session lifetimes.
const (
	// DefaultSessionLifetime is how long a session lives unless its
	// authorization says otherwise (the vendor's three minutes).
	DefaultSessionLifetime = 3 * time.Minute
	// MaxSessionLifetime is the latest expires_at an authorization may
	// set, counted from the session's creation.
	MaxSessionLifetime = time.Hour
)

// ActorSession is the actor type of audit records written for a session
// key; the record's authorized_by names the application that authorized
// the session.
const ActorSession = "session"

// Session rule conditions.
const (
	ConditionAttributeID        = "id"
	ConditionAttributeContainer = "container"
	ConditionEquals             = "equals"
	ConditionStartsWith         = "starts_with"
)

const (
	sessionKeyMarker = "sess_"
	nonceRandomBytes = 16
	nonceLen         = 22 // base62 digits of 128 bits
)

// CreatedSession is the answer of POST /sessions; SessionKey is shown
// only this once.
type CreatedSession struct {
	SessionKey string     `json:"session_key"`
	Nonce      string     `json:"nonce"`
	ExpiresAt  *Timestamp `json:"expires_at"`
}

// Condition restricts a session's access rule to tokens whose attribute
// (id or container) equals or starts with a value.
type Condition struct {
	Attribute string `json:"attribute"`
	Operator  string `json:"operator"`
	Value     string `json:"value"`
}

// SessionRule is an access rule of a session: as an application's, but
// scoped by conditions instead of (or as well as nothing but) a container.
type SessionRule struct {
	Description string      `json:"description,omitempty"`
	Priority    int         `json:"priority"`
	Container   string      `json:"container,omitempty"`
	Conditions  []Condition `json:"conditions,omitempty"`
	Transform   string      `json:"transform"`
	Permissions []string    `json:"permissions"`
}

// SessionAuthorization is the body of POST /sessions/authorize.
type SessionAuthorization struct {
	Nonce       string        `json:"nonce"`
	ExpiresAt   string        `json:"expires_at,omitempty"`
	Permissions []string      `json:"permissions,omitempty"`
	Rules       []SessionRule `json:"rules,omitempty"`
}

// sessionRecord is a session as stored, sealed.
type sessionRecord struct {
	ID            string        `json:"id"`
	ApplicationID string        `json:"application_id"` // the public application that created it
	Digest        string        `json:"digest"`
	NonceDigest   string        `json:"nonce_digest"`
	CreatedAt     *Timestamp    `json:"created_at"`
	ExpiresAt     *Timestamp    `json:"expires_at"`
	AuthorizedBy  string        `json:"authorized_by,omitempty"`
	AuthorizedAt  *Timestamp    `json:"authorized_at,omitempty"`
	Permissions   []string      `json:"permissions,omitempty"`
	Rules         []SessionRule `json:"rules,omitempty"`
}

// sessionIndexEntry is what a session key's or nonce's digest points at;
// it holds no secret.
type sessionIndexEntry struct {
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
}

func sessionKey(tenantID, id string) []byte {
	return []byte(keyVersion + "t/" + tenantID + "/session/" + id)
}

func sessionKeyIndexKey(digestHex string) []byte {
	return []byte(keyVersion + "sesskey/" + digestHex)
}

func sessionNonceIndexKey(digestHex string) []byte {
	return []byte(keyVersion + "sessnonce/" + digestHex)
}

// newSessionKey returns a fresh session key for a tenant of tenantType.
func newSessionKey(tenantType string) string {
	body := "key_" + keyEnv(tenantType) + "_" + sessionKeyMarker + base62(randomBytes(keyRandomBytes), keyPayloadLen)
	return body + keyChecksum(body)
}

// isSessionKey reports whether key has a session key's prefix; it may
// still be malformed.
func isSessionKey(key string) bool {
	return strings.HasPrefix(key, "key_test_"+sessionKeyMarker) || strings.HasPrefix(key, "key_prod_"+sessionKeyMarker)
}

// wellFormedSessionKey checks a session key's shape and checksum without
// any storage read.
func wellFormedSessionKey(key string) bool {
	if !isSessionKey(key) {
		return false
	}
	rest := key[len("key_test_"+sessionKeyMarker):]
	if len(rest) != keyPayloadLen+keyChecksumLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(base62Digits, rest[i]) < 0 {
			return false
		}
	}
	body := key[:len(key)-keyChecksumLen]
	return keyChecksum(body) == key[len(body):]
}

// CreateSession starts a session for the public application caller; it
// has no rights until authorized.
func (s *Store) CreateSession(ctx context.Context, caller *Principal) (*CreatedSession, error) {
	if caller == nil || caller.Application.IsSession() || caller.Application.Type != AppPublic {
		return nil, fmt.Errorf("%w: only public applications create sessions", ErrForbidden)
	}
	t := caller.Tenant
	key, nonce := newSessionKey(t.Type), base62(randomBytes(nonceRandomBytes), nonceLen)
	now := s.now()
	rec := &sessionRecord{
		ID: uuid.NewString(), ApplicationID: caller.Application.ID, Digest: keyDigest(key), NonceDigest: keyDigest(nonce),
		CreatedAt: stamp(now), ExpiresAt: stamp(now.Add(DefaultSessionLifetime)),
	}
	err := s.kv.Update(ctx, func(w Writer) error {
		tk, t, err := s.tenantForWrite(w, t.ID)
		if err != nil {
			return err
		}
		if err := s.writeAudit(w, tk, t, byApp(caller.Application, "session", rec.ID, "create", "session created")); err != nil {
			return err
		}
		return s.putSession(w, tk, t.ID, rec, now)
	})
	if err != nil {
		return nil, err
	}
	return &CreatedSession{SessionKey: key, Nonce: nonce, ExpiresAt: rec.ExpiresAt}, nil
}

// putSession writes a session and its two index entries, each to vanish
// when the session expires.
func (s *Store) putSession(w Writer, tk *tenantKeys, tenantID string, rec *sessionRecord, now time.Time) error {
	ttl := rec.ExpiresAt.Sub(now)
	if ttl <= 0 {
		return ErrNotFound
	}
	sealed, err := tk.sealRecord("session", tenantID, rec.ID, rec)
	if err != nil {
		return err
	}
	if err := w.Put(sessionKey(tenantID, rec.ID), sealed, ttl); err != nil {
		return err
	}
	idx, err := json.Marshal(sessionIndexEntry{TenantID: tenantID, SessionID: rec.ID})
	if err != nil {
		return err
	}
	if err := w.Put(sessionKeyIndexKey(rec.Digest), idx, ttl); err != nil {
		return err
	}
	return w.Put(sessionNonceIndexKey(rec.NonceDigest), idx, ttl)
}

// AuthorizeSession grants the session named by in.Nonce the permissions
// or rules of in, for the authorizer's application, which must be a
// private or management application holding each permission it grants.
// An unknown or expired nonce, or one of another tenant, is ErrNotFound;
// a session already authorized is ErrConflict.
func (s *Store) AuthorizeSession(ctx context.Context, authorizer *Principal, in SessionAuthorization) error {
	app := authorizer.Application
	if app.IsSession() || (app.Type != AppPrivate && app.Type != AppManagement) {
		return fmt.Errorf("%w: only private and management applications authorize sessions", ErrForbidden)
	}
	if err := in.validate(); err != nil {
		return err
	}
	if err := in.checkHeld(app); err != nil {
		return err
	}
	tenantID := authorizer.Tenant.ID
	return s.kv.Update(ctx, func(w Writer) error {
		now := s.now()
		raw, err := w.Get(sessionNonceIndexKey(keyDigest(in.Nonce)))
		if err != nil {
			return err
		}
		var idx sessionIndexEntry
		if err := json.Unmarshal(raw, &idx); err != nil {
			return err
		}
		if idx.TenantID != tenantID { // another tenant's session does not exist for this caller
			return ErrNotFound
		}
		tk, t, err := s.tenantForWrite(w, tenantID)
		if err != nil {
			return err
		}
		var rec sessionRecord
		if err := s.getSealed(w, tk, "session", tenantID, idx.SessionID, sessionKey(tenantID, idx.SessionID), &rec); err != nil {
			return err
		}
		if !now.Before(rec.ExpiresAt.Time) {
			return ErrNotFound
		}
		if rec.AuthorizedBy != "" {
			return fmt.Errorf("%w: the session is already authorized", ErrConflict)
		}
		if in.ExpiresAt != "" {
			at, err := ParseDateTime("expires_at", in.ExpiresAt)
			if err != nil {
				return err
			}
			switch {
			case !at.After(now):
				return invalid("expires_at", "expires_at must be in the future")
			case at.After(rec.CreatedAt.Add(MaxSessionLifetime)):
				return invalid("expires_at", "expires_at must be at most one hour after the session was created")
			}
			rec.ExpiresAt = stamp(at)
		}
		rec.AuthorizedBy, rec.AuthorizedAt = app.ID, stamp(now)
		rec.Permissions, rec.Rules = in.Permissions, in.Rules
		msg := fmt.Sprintf("session authorized with %d permissions and %d rules", len(rec.Permissions), len(rec.Rules))
		if err := s.writeAudit(w, tk, t, byApp(app, "session", rec.ID, "authorize", msg)); err != nil {
			return err
		}
		return s.putSession(w, tk, tenantID, &rec, now)
	})
}

// validate checks an authorization's shape, normalizing rule containers
// and sorting rules by priority. A session may hold only what a private
// application may (token and reactor permissions): a browser's key never
// manages the tenant, and every call it makes is a token or reactor call,
// audited as the session.
func (in *SessionAuthorization) validate() error {
	v := &ValidationError{}
	if in.Nonce == "" {
		v.Add("nonce", "nonce is required")
	} else if len(in.Nonce) > 200 {
		v.Add("nonce", "nonce is not a session's nonce")
	}
	if len(in.Permissions) == 0 && len(in.Rules) == 0 {
		v.Add("permissions", "either permissions or rules must be given")
	}
	if len(in.Permissions) > 0 && len(in.Rules) > 0 {
		v.Add("rules", "give permissions or rules, not both")
	}
	checkNames := func(field string, list []string) {
		for i, p := range list {
			switch {
			case !isPermission(p):
				v.Add(fmt.Sprintf("%s[%d]", field, i), "unknown permission")
			case !slices.Contains(permissionsByType[AppPrivate], p):
				v.Add(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("a session holds only the permissions of private applications, not %q", p))
			}
		}
	}
	checkNames("permissions", in.Permissions)
	seen := map[int]bool{}
	for i := range in.Rules {
		r := &in.Rules[i]
		field := fmt.Sprintf("rules[%d]", i)
		if seen[r.Priority] {
			v.Add(field+".priority", "priority must be unique")
		}
		seen[r.Priority] = true
		switch {
		case r.Container == "" && len(r.Conditions) == 0:
			v.Add(field+".conditions", "a session rule needs conditions or a container")
		case r.Container != "" && len(r.Conditions) > 0:
			v.Add(field+".container", "container and conditions are mutually exclusive")
		case r.Container != "":
			c, ok := NormalizeContainer(r.Container)
			if !ok {
				v.Add(field+".container", "container must start and end with / and use only a-z, 0-9, _ and -")
			}
			r.Container = c
		}
		for j := range r.Conditions {
			c := &r.Conditions[j]
			cf := fmt.Sprintf("%s.conditions[%d]", field, j)
			if c.Attribute != ConditionAttributeID && c.Attribute != ConditionAttributeContainer {
				v.Add(cf+".attribute", "attribute must be id or container")
			}
			if c.Operator != ConditionEquals && c.Operator != ConditionStartsWith {
				v.Add(cf+".operator", "operator must be equals or starts_with")
			}
			if c.Value == "" || len(c.Value) > 400 {
				v.Add(cf+".value", "value must be 1 to 400 characters")
			}
			if c.Attribute == ConditionAttributeContainer {
				c.Value = strings.ToLower(c.Value)
			}
		}
		switch r.Transform {
		case TransformReveal, TransformMask, TransformRedact:
		default:
			v.Add(field+".transform", "transform must be reveal, mask or redact")
		}
		if len(r.Permissions) == 0 {
			v.Add(field+".permissions", "at least one permission is required")
		}
		checkNames(field+".permissions", r.Permissions)
		for j, p := range r.Permissions {
			if isPermission(p) && slices.Contains(permissionsByType[AppPrivate], p) && !ruleScoped(p) {
				v.Add(fmt.Sprintf("%s.permissions[%d]", field, j), fmt.Sprintf("a session rule names tokens; %q acts on no token, so grant it in permissions", p))
			}
		}
		if len(r.Description) > 200 {
			v.Add(field+".description", "must be at most 200 characters")
		}
	}
	sort.SliceStable(in.Rules, func(i, j int) bool { return in.Rules[i].Priority < in.Rules[j].Priority })
	return v.OrNil()
}

// checkHeld refuses a grant of a permission the authorizing application
// does not hold, or holds on no container the grant names.
func (in *SessionAuthorization) checkHeld(app *Application) error {
	const action = "granting it to a session"
	for _, p := range in.Permissions {
		if !app.Can(p) {
			return &PermissionError{Permission: p, Action: action}
		}
	}
	for _, r := range in.Rules {
		for _, p := range r.Permissions {
			if !app.Can(p) {
				return &PermissionError{Permission: p, Action: action}
			}
			if r.Container != "" && len(app.Rules) > 0 {
				if _, ok := app.grant(p, r.Container); !ok {
					return &PermissionError{Permission: p, Container: r.Container, Action: action}
				}
			}
		}
	}
	return nil
}

// sessionGrant is what a session key may do: its own grant, bounded by
// the authorizer's application as it is now.
type sessionGrant struct {
	id          string
	expires     time.Time
	authorizer  *Application // shared: never modified
	permissions []string
	rules       []SessionRule // sorted by priority
}

// IsSession reports whether the application is a session's stand-in.
func (a *Application) IsSession() bool { return a.session != nil }

// AuthorizedBy is the id of the application that authorized the session
// the application stands in for; "" for a real application.
func (a *Application) AuthorizedBy() string {
	if a.session == nil || a.session.authorizer == nil {
		return ""
	}
	return a.session.authorizer.ID
}

func (g *sessionGrant) can(perm string) bool {
	if g.authorizer == nil || !g.authorizer.Can(perm) {
		return false
	}
	if slices.Contains(g.permissions, perm) {
		return true
	}
	if !ruleScoped(perm) {
		return false // a rule names tokens, which documents and intents are not
	}
	for _, r := range g.rules {
		if slices.Contains(r.Permissions, perm) {
			return true
		}
	}
	return false
}

// ruleScoped reports whether a session rule can grant perm: a rule names
// tokens (by id or container), so it grants the token permissions and
// reactor:invoke (whose token:use each token's rule decides), never a
// permission on documents or token intents, which have no container and
// whose ids no rule's condition is about. Granted in a rule, such a
// permission reached every document or intent of the tenant.
func ruleScoped(perm string) bool {
	return strings.HasPrefix(perm, "token:") || perm == "reactor:invoke"
}

// grant decides perm on a token (id may be "" where the caller knows only
// the container: a rule with an id condition then does not match).
func (g *sessionGrant) grant(perm, id, container string) (string, bool) {
	if g.authorizer == nil {
		return "", false
	}
	own, ok := "", false
	if len(g.rules) == 0 {
		if slices.Contains(g.permissions, perm) {
			own, ok = TransformMask, true
			if perm == "token:use" {
				own = TransformReveal
			}
		}
	} else {
		for _, r := range g.rules {
			if slices.Contains(r.Permissions, perm) && r.matches(id, container) {
				own, ok = r.Transform, true
				break
			}
		}
	}
	if !ok {
		return "", false
	}
	theirs, ok := g.authorizer.grant(perm, container)
	if !ok {
		return "", false
	}
	return leastRevealing(own, theirs), true
}

func (r *SessionRule) matches(id, container string) bool {
	if r.Container != "" {
		return containerCovers(r.Container, container)
	}
	for _, c := range r.Conditions {
		v := id
		if c.Attribute == ConditionAttributeContainer {
			v = container
		}
		if v == "" {
			return false
		}
		switch c.Operator {
		case ConditionEquals:
			if v != c.Value {
				return false
			}
		case ConditionStartsWith:
			if !strings.HasPrefix(v, c.Value) {
				return false
			}
		default:
			return false
		}
	}
	return len(r.Conditions) > 0
}

// leastRevealing returns the transform of a and b that shows less.
func leastRevealing(a, b string) string {
	rank := map[string]int{TransformRedact: 0, TransformMask: 1, TransformReveal: 2}
	if rank[a] <= rank[b] {
		return a
	}
	return b
}

// authenticateSession resolves a session key to its tenant and a stand-in
// application carrying the session's grant. An expired session, an
// unknown key, a tenant gone or an authorizer deleted are all
// ErrUnauthenticated.
func (s *Store) authenticateSession(ctx context.Context, key string) (*Principal, error) {
	if !wellFormedSessionKey(key) {
		return nil, ErrUnauthenticated
	}
	// An authorized session never changes; what it resolves to does when
	// its tenant or authorizer changes, which moves the credential cache's
	// generation on, so it is cached as an API key's principal is, until
	// it expires.
	digest := keyDigest(key)
	if p, ok := s.credentials.principal(digest); ok {
		if g := p.Application.session; g != nil && s.now().Before(g.expires) {
			return p, nil
		}
	}
	generation := s.credentials.generation.Load()
	p := &Principal{}
	err := s.kv.View(ctx, func(r Reader) error {
		raw, err := r.Get(sessionKeyIndexKey(digest))
		if err != nil {
			return err
		}
		var idx sessionIndexEntry
		if err := json.Unmarshal(raw, &idx); err != nil {
			return err
		}
		tk, err := s.tenantKeysFor(r, idx.TenantID)
		if err != nil {
			return err
		}
		var rec sessionRecord
		if err := s.getSealed(r, tk, "session", idx.TenantID, idx.SessionID, sessionKey(idx.TenantID, idx.SessionID), &rec); err != nil {
			return err
		}
		if !s.now().Before(rec.ExpiresAt.Time) {
			return ErrNotFound
		}
		if p.Tenant, err = openCached[Tenant](s, r, tk, "tenant", idx.TenantID, idx.TenantID, tenantKey(idx.TenantID)); err != nil {
			return err
		}
		g := &sessionGrant{id: rec.ID, expires: rec.ExpiresAt.Time, permissions: rec.Permissions, rules: rec.Rules}
		if rec.AuthorizedBy != "" {
			if g.authorizer, err = openCached[Application](s, r, tk, "application", idx.TenantID, rec.AuthorizedBy, applicationKey(idx.TenantID, rec.AuthorizedBy)); err != nil {
				return err
			}
		}
		p.KeyID = rec.ID
		p.Application = &Application{ID: rec.ID, TenantID: idx.TenantID, Name: "session", Type: AppPublic, Permissions: []string{}, session: g}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	if p.Application.session.authorizer != nil { // an unauthorized one changes once authorized
		s.credentials.rememberPrincipal(digest, generation, p)
	}
	return p, nil
}

// stampSession marks an audit record of a call with a session key as the
// session's, naming the application that authorized it.
func (a *Application) stampSession(rec *AuditRecord) {
	if a.session != nil && rec != nil {
		rec.ActorType, rec.AuthorizedBy = ActorSession, a.AuthorizedBy()
	}
}

// auditedAs returns the audit record of a call by app: rec itself, or for
// a session a copy stamped as the session's.
func (a *Application) auditedAs(rec *AuditRecord) *AuditRecord {
	if a == nil || a.session == nil || rec == nil {
		return rec
	}
	c := *rec
	a.stampSession(&c)
	return &c
}
