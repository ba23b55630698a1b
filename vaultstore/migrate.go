package vaultstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Store formats and what changed:
//
//	1  the first release
//	2  token order entries carry the token type, so search decides type
//	   terms without opening records
//	3  token counts are kept by type and container, not by type alone, so
//	   a list takes its total from them instead of visiting every token
//
// A store of an older format is copied aside (a plain copy of the
// directory, taken before Badger opens it) and migrated forward when it
// opens; each migration is idempotent, and the meta file records the new
// format only once every migration has finished, so an interrupted
// upgrade runs again on the next start. A store of a newer format is
// refused (see checkOrCreateMeta).

// migrations[n] moves a store from format n to n+1.
var migrations = map[int]func(*Store, context.Context) error{
	1: (*Store).migrateOrderTypes,
	2: (*Store).migrateCountsByContainer,
}

// backupBeforeMigration copies the storage directory to a sibling named
// after the old format and the time, and returns its path.
func backupBeforeMigration(dir string, format int, now time.Time) (string, error) {
	dst := fmt.Sprintf("%s.format%d-backup-%s", dir, format, now.UTC().Format("20060102T150405Z"))
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		return copyFile(path, target)
	})
	if err != nil {
		return "", fmt.Errorf("backing up %s before migrating it: %w", dir, err)
	}
	return dst, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// migrate runs the migrations from meta's format to FormatVersion and
// records the new format.
func (s *Store) migrate(ctx context.Context, meta *storeMeta) error {
	from := meta.Format
	for v := meta.Format; v < FormatVersion; v++ {
		m := migrations[v]
		if m == nil {
			return fmt.Errorf("no migration from store format %d", v)
		}
		if err := m(s, ctx); err != nil {
			return fmt.Errorf("migrating store format %d to %d: %w", v, v+1, err)
		}
	}
	meta.Format = FormatVersion
	if err := s.meta.save(ctx, meta); err != nil {
		return err
	}
	s.logger.Info("store migrated", zap.Int("from_format", from), zap.Int("to_format", FormatVersion))
	return nil
}

// tenantIDs lists the ids of every tenant the store holds.
func (s *Store) tenantIDs(ctx context.Context) ([]string, error) {
	var tenants []string
	err := s.kv.View(ctx, func(r Reader) error {
		tenants = tenants[:0]
		prefix := tenantPrefix()
		return r.Scan(prefix, nil, func(key, _ []byte) error {
			tenants = append(tenants, string(key[len(prefix):]))
			return nil
		})
	})
	return tenants, err
}

// migrateOrderTypes (1 → 2) adds each token's type to its order entry.
func (s *Store) migrateOrderTypes(ctx context.Context) error {
	tenants, err := s.tenantIDs(ctx)
	if err != nil {
		return err
	}
	for _, tid := range tenants {
		prefix := tokenOrderPrefix(tid)
		var after []byte
		for {
			var keys [][]byte
			if err := s.kv.View(ctx, func(r Reader) error {
				keys = keys[:0]
				return r.Scan(prefix, after, func(key, value []byte) error {
					if len(keys) == resealBatch {
						return ErrStopScan
					}
					keys = append(keys, key)
					return nil
				})
			}); err != nil {
				return err
			}
			if len(keys) == 0 {
				break
			}
			if err := s.kv.Update(ctx, func(w Writer) error {
				tk, err := s.tenantKeysFor(w, tid)
				if err != nil {
					return err
				}
				for _, key := range keys {
					value, err := w.Get(key)
					if errors.Is(err, ErrNotFound) {
						continue
					} else if err != nil {
						return err
					}
					if parseOrderValue(value).tokenType != "" {
						continue
					}
					var rec tokenRecord
					err = s.getSealed(w, tk, "token", tid, lastSegment(key), tokenKey(tid, lastSegment(key)), &rec)
					if errors.Is(err, ErrNotFound) {
						continue // an entry whose token is gone; the list skips it
					} else if err != nil {
						return err
					}
					if err := w.Put(key, orderValue(&rec), 0); err != nil {
						return err
					}
				}
				return nil
			}); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			after = keys[len(keys)-1]
		}
	}
	return nil
}

// migrateCountsByContainer (2 → 3) recounts each tenant's tokens by type
// and container from its order entries, which name both, and replaces the
// counts by type. The latest creation time of each type is kept, also for
// a type whose tokens are all gone. The new totals are written before the
// old counts are deleted, and a run after an interruption takes them in,
// so the migration can run again.
func (s *Store) migrateCountsByContainer(ctx context.Context) error {
	tenants, err := s.tenantIDs(ctx)
	if err != nil {
		return err
	}
	for _, tid := range tenants {
		cells := map[usageCell]TypeMetrics{}
		var old [][]byte
		err := s.kv.View(ctx, func(r Reader) error {
			clear(cells)
			old = old[:0]
			prefix := usagePrefix(tid)
			if err := r.Scan(prefix, nil, func(key, raw []byte) error {
				rest := string(key[len(prefix):])
				var typ string
				switch strings.Count(rest, "/") {
				case 1: // format 2: {type}/total or {type}/{change}
					typ, _, _ = strings.Cut(rest, "/")
					old = append(old, key)
				case 2: // a total of an interrupted run: t/{type}/{container hex}
					typ = strings.Split(rest, "/")[1]
				default:
					return nil
				}
				var d usageDelta
				if err := json.Unmarshal(raw, &d); err != nil {
					return fmt.Errorf("usage count: %w", err)
				}
				c := usageCell{typ, "/"} // only the time is kept: the counts are redone below
				m := cells[c]
				m.add(TypeMetrics{LastCreatedAt: d.LastCreatedAt})
				cells[c] = m
				return nil
			}); err != nil {
				return err
			}
			prefix = tokenOrderPrefix(tid)
			return r.Scan(prefix, nil, func(key, value []byte) error {
				o := parseOrderValue(value)
				created, ok := orderCreated(key[len(prefix):])
				if !ok || o.tokenType == "" {
					return fmt.Errorf("token order entry %s: malformed", lastSegment(key))
				}
				c := usageCell{o.tokenType, o.container}
				m := cells[c]
				m.add(TypeMetrics{Count: 1, LastCreatedAt: &Timestamp{created.UTC()}})
				cells[c] = m
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("tenant %s: %w", tid, err)
		}
		if err := s.kv.Update(ctx, func(w Writer) error { return putUsageTotals(w, tid, cells) }); err != nil {
			return fmt.Errorf("tenant %s: %w", tid, err)
		}
		if err := s.deleteKeys(ctx, old); err != nil {
			return fmt.Errorf("tenant %s: %w", tid, err)
		}
	}
	return nil
}
