package vaultstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// Store formats and what changed:
//
//	1  the first release
//	2  token order entries carry the token type, so search decides type
//	   terms without opening records
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
	if err := writeMeta(s.dir, meta); err != nil {
		return err
	}
	s.logger.Info("store migrated", zap.Int("from_format", from), zap.Int("to_format", FormatVersion))
	return nil
}

// migrateOrderTypes (1 → 2) adds each token's type to its order entry.
func (s *Store) migrateOrderTypes(ctx context.Context) error {
	var tenants []string
	if err := s.kv.View(ctx, func(r Reader) error {
		prefix := tenantPrefix()
		return r.Scan(prefix, nil, func(key, _ []byte) error {
			tenants = append(tenants, string(key[len(prefix):]))
			return nil
		})
	}); err != nil {
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
