package vaultstore

import (
	"context"
	"fmt"
	"strconv"
)

// healthKey is where the health check writes; it is not any tenant's.
var healthKey = []byte(keyVersion + "health")

// CheckHealth reports whether the store answers a write and a read: it
// writes the time under a key of its own (durably, as every write) and
// reads it back.
func (s *Store) CheckHealth(ctx context.Context) error {
	want := strconv.FormatInt(s.now().UnixNano(), 10)
	if err := s.kv.Update(ctx, func(w Writer) error { return w.Put(healthKey, []byte(want), 0) }); err != nil {
		return fmt.Errorf("store write: %w", err)
	}
	return s.kv.View(ctx, func(r Reader) error {
		got, err := r.Get(healthKey)
		if err != nil {
			return fmt.Errorf("store read: %w", err)
		}
		if string(got) != want {
			return fmt.Errorf("store read: a different value than was just written")
		}
		return nil
	})
}
