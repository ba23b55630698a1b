package postgres

// The vault is written against Badger's conflict rule: a transaction
// whose read key was written by a transaction that committed first runs
// again, so every decision it commits was made on fresh data. PostgreSQL's
// SERIALIZABLE is weaker in one case: when A reads x and writes y while B
// writes x and commits first, and nothing else links them, A commits as if
// it ran before B, on x's old value. That is serializable, but not what
// the vault expects of, say, a write that read a tenant record another
// node just deleted.
//
// So before COMMIT, an Update that wrote anything locks the rows it read
// and did not write itself (SELECT ... FOR SHARE, in the COMMIT's round
// trip). In a SERIALIZABLE transaction, locking a row that a transaction
// committed after this one's snapshot changed or deleted fails with a
// serialization failure, and the Update runs again. Rows the transaction
// read as missing cannot be locked: a key another transaction inserts
// meanwhile is caught only by PostgreSQL's own predicate locks (when the
// two transactions form a cycle). A transaction that read more than
// maxReadChecks rows checks none and relies on SERIALIZABLE alone.
const maxReadChecks = 10000

// read records a key the transaction found, for the check at commit.
func (t *txn) read(key []byte) {
	if t.begin == beginUpdate && len(t.reads) <= maxReadChecks {
		t.reads = append(t.reads, clone(key))
	}
}

// wrote records a key the transaction wrote: its own write already fails
// if another transaction changed the row first.
func (t *txn) wrote(key []byte) {
	if t.written == nil {
		t.written = map[string]struct{}{}
	}
	t.written[string(key)] = struct{}{}
}

// readChecks returns the statement that locks the rows read and not
// written, or nothing.
func (t *txn) readChecks() []stmt {
	if len(t.written) == 0 || len(t.reads) == 0 || len(t.reads) > maxReadChecks {
		return nil
	}
	seen := make(map[string]struct{}, len(t.reads))
	keys := make([][]byte, 0, len(t.reads))
	for _, k := range t.reads {
		if _, w := t.written[string(k)]; w {
			continue
		}
		if _, dup := seen[string(k)]; dup {
			continue
		}
		seen[string(k)] = struct{}{}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil
	}
	return []stmt{{sql: t.s.sql.lockReads, args: []any{keys}}}
}
