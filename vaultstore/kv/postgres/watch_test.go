package postgres

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
	"github.com/tokenvault/tokenvault/vaultstore/kv/postgres/pgtest"
)

// eventually bounds the waits for notices: generous, since the machine
// may be busy.
const eventually = 30 * time.Second

// recorder collects the keys a watcher was told of; nil keys count as
// "drop everything".
type recorder struct {
	mu    sync.Mutex
	keys  map[string]int
	drops int
}

func newRecorder() *recorder { return &recorder{keys: map[string]int{}} }

func (r *recorder) changed(key []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if key == nil {
		r.drops++
		return
	}
	r.keys[string(key)]++
}

func (r *recorder) seen(key string) bool { return r.count(key) > 0 }

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key]
}

func (r *recorder) dropped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drops
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(eventually)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: still waiting for %s", eventually, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cached is the watched predicate of the tests: keys under "rec/".
func cached(key []byte) bool { return bytes.HasPrefix(key, []byte("rec/")) }

// watchedNode opens a store on dsn's "kv" table and watches it.
func watchedNode(t *testing.T, dsn string) (*Store, *recorder) {
	t.Helper()
	s := open(t, testOptions(t, dsn, "kv"))
	r := newRecorder()
	if err := s.Watch(cached, r.changed); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if !s.Healthy() {
		t.Fatal("not Healthy after Watch")
	}
	return s, r
}

// TestWatchTwoNodes: changes committed through one node are reported on
// both; changes outside the watched keys, and rolled back ones, are not.
func TestWatchTwoNodes(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a, ra := watchedNode(t, dsn)
	b, rb := watchedNode(t, dsn)
	ctx := t.Context()
	err := a.Update(ctx, func(w kv.Writer) error {
		if err := w.Put([]byte("rec/1"), []byte("v"), 0); err != nil {
			return err
		}
		if err := w.Put([]byte("other/1"), []byte("v"), 0); err != nil {
			return err
		}
		return w.Delete([]byte("rec/gone"))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Update(ctx, func(w kv.Writer) error {
		if err := w.Put([]byte("rec/rolled back"), []byte("v"), 0); err != nil {
			return err
		}
		return fmt.Errorf("changed my mind")
	})
	if err == nil {
		t.Fatal("the failing Update succeeded")
	}
	if err := b.DeletePrefix(ctx, []byte("rec/1")); err != nil {
		t.Fatal(err)
	}
	// a marker written last: once it arrived, every earlier notice from
	// the same node has (PostgreSQL delivers one sender's notices in
	// commit order)
	if err := a.Update(ctx, func(w kv.Writer) error { return w.Put([]byte("rec/marker"), nil, 0) }); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*recorder{"writer": ra, "other node": rb} {
		waitFor(t, name+" to hear of rec/marker", func() bool { return r.seen("rec/marker") })
		for _, k := range []string{"rec/1", "rec/gone"} {
			if !r.seen(k) {
				t.Errorf("%s: no notice of %q", name, k)
			}
		}
		for _, k := range []string{"other/1", "rec/rolled back"} {
			if r.seen(k) {
				t.Errorf("%s: a notice of %q, which is not watched or did not commit", name, k)
			}
		}
	}
	// the DeletePrefix through b
	waitFor(t, "the DeletePrefix's notice", func() bool { return ra.count("rec/1") >= 2 && rb.count("rec/1") >= 2 })
}

// TestWatchReconnect terminates a node's listening connection: the node
// becomes unhealthy, reconnects by itself, reports "drop everything", and
// hears of later changes again.
func TestWatchReconnect(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a, _ := watchedNode(t, dsn)
	b, rb := watchedNode(t, dsn)
	ctx := t.Context()
	pid := b.watch.Load().listenerPID()
	if pid == 0 {
		t.Fatal("no listener connection")
	}
	c := admin(t, dsn)
	var ok bool
	if err := c.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int64(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend: %v, %v", ok, err)
	}
	waitFor(t, `"drop everything" after the listener was lost`, func() bool { return rb.dropped() > 0 })
	waitFor(t, "the listener to be healthy again", b.Healthy)
	if got := b.watch.Load().listenerPID(); got == pid || got == 0 {
		t.Fatalf("listener pid %d after reconnecting, want a new one", got)
	}
	if err := a.Update(ctx, func(w kv.Writer) error { return w.Put([]byte("rec/after"), []byte("v"), 0) }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a notice after reconnecting", func() bool { return rb.seen("rec/after") })
}

// TestWatchManyKeys: a transaction changing more keys than a notice can
// list makes every node drop everything instead; one changing many keys
// that fit is reported key by key across several notices.
func TestWatchManyKeys(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a, _ := watchedNode(t, dsn)
	_, rb := watchedNode(t, dsn)
	ctx := t.Context()
	long := strings.Repeat("x", 100) // 256 keys of ~110 bytes: several notices
	var keys []string
	for i := range maxNoticeKeys {
		keys = append(keys, fmt.Sprintf("rec/%s/%03d", long, i))
	}
	err := a.Update(ctx, func(w kv.Writer) error {
		for _, k := range keys {
			if err := w.Put([]byte(k), []byte("v"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "notices of all the keys", func() bool {
		for _, k := range keys {
			if !rb.seen(k) {
				return false
			}
		}
		return true
	})
	if rb.dropped() != 0 {
		t.Fatalf("%d drops for %d keys that fit in notices", rb.dropped(), len(keys))
	}
	err = a.Update(ctx, func(w kv.Writer) error {
		for i := range maxNoticeKeys + 1 {
			if err := w.Put(fmt.Appendf(nil, "rec/many/%d", i), []byte("v"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, `"drop everything" for too many keys`, func() bool { return rb.dropped() == 1 })
}

func TestNoticeEncoding(t *testing.T) {
	long := bytes.Repeat([]byte{0xff}, 3000)
	tests := []struct {
		name     string
		keys     [][]byte
		payloads int  // how many notices
		all      bool // one "drop everything"
	}{
		{"one key", [][]byte{[]byte("rec/1")}, 1, false},
		{"binary keys", [][]byte{{0x00}, {0xff, 0x00, ','}, []byte("a,b")}, 1, false},
		{"split over notices", [][]byte{long, long, long, long}, 4, false},
		{"key too long for a notice", [][]byte{bytes.Repeat([]byte("k"), 6000)}, 1, true},
		{"too many keys", make([][]byte, maxNoticeKeys+1), 1, true},
		{"too many bytes", [][]byte{long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long}, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payloads := encodeNotices(tc.keys)
			if len(payloads) != tc.payloads {
				t.Fatalf("%d payloads, want %d", len(payloads), tc.payloads)
			}
			var got [][]byte
			for _, p := range payloads {
				if len(p) >= 8000 {
					t.Fatalf("a payload of %d bytes: PostgreSQL refuses 8000 or more", len(p))
				}
				keys, ok := decodeNotice(p)
				if !ok {
					if !tc.all || p != flushAll {
						t.Fatalf("payload %.40q decodes as drop everything", p)
					}
					return
				}
				got = append(got, keys...)
			}
			if tc.all {
				t.Fatalf("want drop everything, got %d keys", len(got))
			}
			if len(got) != len(tc.keys) {
				t.Fatalf("decoded %d keys, want %d", len(got), len(tc.keys))
			}
			for i := range got {
				if !bytes.Equal(got[i], tc.keys[i]) {
					t.Fatalf("key %d = %q, want %q", i, got[i], tc.keys[i])
				}
			}
		})
	}
	for _, bad := range []string{"", "*", "k:", "k:!!!", "x:abc", "future format"} {
		if _, ok := decodeNotice(bad); ok {
			t.Errorf("decodeNotice(%q) = ok, want drop everything", bad)
		}
	}
}

// TestHealthyWithoutWatch: a store nobody watches reports no notices
// flowing.
func TestHealthyWithoutWatch(t *testing.T) {
	s := open(t, testOptions(t, pgtest.NewDatabase(t), "kv"))
	if s.Healthy() {
		t.Fatal("Healthy before Watch")
	}
	if err := s.Watch(cached, func([]byte) {}); err != nil {
		t.Fatal(err)
	}
	if err := s.Watch(cached, func([]byte) {}); err == nil {
		t.Fatal("a second Watch succeeded")
	}
	_ = s.Close()
	if s.Healthy() {
		t.Fatal("Healthy after Close")
	}
}
