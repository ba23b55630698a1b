package postgres

import (
	"bytes"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// Scan pages: fn may read and write in the transaction while it scans, and
// a connection runs one statement at a time, so Scan reads a page of rows,
// calls fn for each, then asks for the rows after the page's last key.
// Pages start small (a scan often stops early) and grow; a page holding
// many large values ends early instead, to bound the memory one scan
// holds.
const (
	firstPage    = 32
	maxPage      = 512
	maxPageBytes = 4 << 20
)

// Scan calls fn for every live key under prefix after the key after, in
// key order. Writes fn makes ahead of the scan's position are seen when
// the scan reaches them; writes behind it are not.
func (t *txn) Scan(prefix, after []byte, fn func(key, value []byte) error) error {
	lower := clone(prefix)
	if after != nil && bytes.Compare(after, prefix) >= 0 {
		lower = append(clone(after), 0) // the least key above after
	}
	end := kv.PrefixEnd(prefix)
	limit := firstPage
	for {
		var keys, values [][]byte
		full := false // the page ended on its byte bound, not on limit
		read := func(rows pgx.Rows) error {
			size := 0
			for rows.Next() {
				var k, v []byte
				if err := rows.Scan(&k, &v); err != nil {
					return err
				}
				keys, values = append(keys, k), append(values, nonNil(v))
				if size += len(k) + len(v); size >= maxPageBytes {
					full = true
					return nil // closing the rows skips the rest
				}
			}
			return nil
		}
		st := stmt{sql: t.s.sql.scanFrom, args: []any{lower, limit}, rows: read}
		if end != nil {
			st = stmt{sql: t.s.sql.scanRange, args: []any{lower, end, limit}, rows: read}
		}
		if err := t.roundTrip("scan", []stmt{st}, -1); err != nil {
			return err
		}
		for i, k := range keys {
			t.read(k)
			if err := fn(k, values[i]); err != nil {
				if errors.Is(err, kv.ErrStopScan) {
					return nil
				}
				return err
			}
			if t.err != nil { // fn ignored a failed call
				return t.err
			}
		}
		if len(keys) < limit && !full {
			return nil
		}
		lower = append(clone(keys[len(keys)-1]), 0)
		if full {
			limit = max(1, len(keys)/2)
		} else {
			limit = min(maxPage, limit*4)
		}
	}
}
